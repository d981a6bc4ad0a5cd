"""The soak run's report: one record per window from the monitor's counters, the verdict on the four
criteria, the CPU summary, and the table formats (a console row per window, the Markdown table of
docs/SOAK.md)."""
from __future__ import annotations

import os

import numpy as np

from .process_stats import rss_kib
from .soak_monitor import RATE

NODE_KINDS = ("simulator", "estimator", "inverse_dynamics")   # report order


def _percentile_ms(values_ns, p):
    return round(float(np.percentile(np.asarray(values_ns) / 1e6, p)), 3) if len(values_ns) else None



def _float(values, key):
    try:
        return float(values[key])
    except (KeyError, TypeError, ValueError):
        return float("nan")


def window_record(index, t_start, t_end, mon, procs, unanswered, warmup, cpu):
    """Window ``index`` (``t_start`` .. ``t_end`` s after the start) as a dict, from the counters of ``mon``
    (a :class:`~robodyn_ros.benchmarks.soak_monitor.SoakMonitor`), the node processes ``procs`` and
    ``unanswered`` (states the controller never answered); ``cpu`` is
    :meth:`~robodyn_ros.benchmarks.process_stats.CpuSampler.sample`'s answer for the window."""
    cpu_percent, idle_fraction, cpu_used = cpu
    messages = mon.w_states + mon.w_commands + mon.w_answers + mon.w_other
    wall = t_end - t_start
    stamp_span = ((mon.w_last_stamp - mon.w_first_stamp) / 1e9) if mon.w_states > 1 else 0.0
    expected_stamps = int(round(stamp_span * RATE)) + 1 if mon.w_states else 0
    diag = mon.w_id_diag
    p50 = [_float(d, "latency_p50_us") for d in diag]
    p99 = [_float(d, "latency_p99_us") for d in diag]
    mx = [_float(d, "latency_max_us") for d in diag]
    rec = {
        "window": index, "warmup": warmup, "t_start_s": round(t_start, 3), "t_end_s": round(t_end, 1),
        "wall_s": round(wall, 3),
        "states_expected_wall": int(round(wall * RATE)), "states_received": mon.w_states,
        "states_expected_stamps": expected_stamps, "states_dropped_transport": mon.w_gaps,
        "simulator_lag_steps": int(round(wall * RATE)) - expected_stamps,
        "answers_received": mon.w_answers, "states_unanswered": unanswered,
        "commands_received": mon.w_commands, "nan_commands": mon.w_nan, "over_limit_commands": mon.w_over,
        "max_abs_tau_over_limit": round(mon.w_max_abs_ratio, 4),
        "tracking_error_max_rad": round(mon.w_tracking_max, 4),
        "estimator_payload_mass": mon.payload["mass"] if mon.payload else None,
        "estimator_behind_s": mon.payload["behind_newest_joint_state_s"] if mon.payload else None,
        "controller_p50_ms": round(float(np.nanmean(p50)) / 1e3, 4) if p50 else None,
        "controller_p99_ms": round(float(np.nanmean(p99)) / 1e3, 4) if p99 else None,
        "controller_max_ms": round(float(np.nanmax(mx)) / 1e3, 4) if mx else None,
        "round_trip_p50_ms": _percentile_ms(mon.w_round_trip, 50),
        "round_trip_p99_ms": _percentile_ms(mon.w_round_trip, 99),
        "round_trip_max_ms": round(max(mon.w_round_trip) / 1e6, 3) if mon.w_round_trip else None,
        "rss_kib": {kind: rss_kib(procs[kind].pid) for kind in NODE_KINDS} | {"monitor": rss_kib(os.getpid())},
        "alive": {kind: procs[kind].poll() is None for kind in NODE_KINDS},
        "cpu_percent": cpu_percent,
        "machine_idle_fraction": idle_fraction,
        "monitor_messages": messages,
        "monitor_cpu_us_per_message": (round(1e6 * cpu_used["monitor"] / messages, 1)
                                       if messages and cpu_used.get("monitor") is not None else None),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    return rec


def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else float("nan")


def _growth(first, last):
    """Relative RSS growth per process from the ``first`` to the ``last`` ``rss_kib`` dict (None if unknown)."""
    return {k: (round((last[k] - first[k]) / first[k], 4) if first.get(k) and last.get(k) else None)
            for k in first}


def _window_start(w):
    return w["t_start_s"] if "t_start_s" in w else w["t_end_s"] - w["wall_s"]


def memory_growth_details(windows, memory_warmup_seconds):
    """Information beside the memory rule (it does not change the verdict): each window's RSS growth from
    the first window after the warm-up (``rss_growth_from_first_measured``, the rule's baseline), and the
    growth to the last window from the first window that began after ``memory_warmup_seconds`` (the
    allocators' and caches' start-up growth over) with the RSS slope (KiB/min, least squares) from there on."""
    measured = [w for w in windows if not w["warmup"]] or windows
    per_window = {w["window"]: _growth(measured[0]["rss_kib"], w["rss_kib"]) for w in measured}
    after = [w for w in windows if _window_start(w) >= memory_warmup_seconds - 1e-6]
    out = {"memory_warmup_seconds": memory_warmup_seconds, "growth_per_window_from_first_measured": per_window,
           "from_window_after_memory_warmup": after[0]["window"] if after else None,
           "growth_after_memory_warmup": None, "rss_slope_kib_per_min_after_memory_warmup": None}
    if len(after) >= 2:
        out["growth_after_memory_warmup"] = _growth(after[0]["rss_kib"], after[-1]["rss_kib"])
        t = np.array([w["t_end_s"] for w in after]) / 60.0
        slopes = {}
        for k in after[0]["rss_kib"]:
            rss = [w["rss_kib"].get(k) for w in after]
            slopes[k] = (round(float(np.polyfit(t, np.array(rss, dtype=float), 1)[0]), 1)
                         if all(r is not None for r in rss) else None)
        out["rss_slope_kib_per_min_after_memory_warmup"] = slopes
    return out


def verdict(windows, exits, memory_growth_limit=0.05, latency_tolerance=0.20, compare_windows=3,
            memory_warmup_seconds=None):
    """The four acceptance criteria from the window records; returns a dict of
    ``{criterion: {"pass": bool, ...measured}}`` plus ``"pass"`` (all four). The memory rule is growth
    first window after warm-up -> last window < ``memory_growth_limit``; with ``memory_warmup_seconds`` the
    criterion also carries :func:`memory_growth_details` (information only: the rule is unchanged)."""
    measured = [w for w in windows if not w["warmup"]] or windows
    out = {}
    nan = sum(w["nan_commands"] for w in windows)
    over = sum(w["over_limit_commands"] for w in windows)
    out["no_bad_torques"] = {"pass": nan == 0 and over == 0, "nan_commands": nan, "over_limit_commands": over,
                             "max_abs_tau_over_limit": max(w["max_abs_tau_over_limit"] for w in windows)}
    out["no_crashes"] = {"pass": not exits, "exited": exits}
    first, last = measured[0]["rss_kib"], measured[-1]["rss_kib"]
    growth = _growth(first, last)
    nodes_growth = [growth[k] for k in NODE_KINDS]
    out["memory_growth"] = {"pass": all(g is not None and g < memory_growth_limit for g in nodes_growth),
                            "limit": memory_growth_limit, "growth": growth,
                            "from_window": measured[0]["window"], "to_window": measured[-1]["window"],
                            "rss_first_kib": first, "rss_last_kib": last}
    if memory_warmup_seconds is not None:
        out["memory_growth"]["information"] = memory_growth_details(windows, memory_warmup_seconds)
    k = max(1, min(compare_windows, len(measured) // 2))
    start = _mean([w["controller_p99_ms"] for w in measured[:k]])
    end = _mean([w["controller_p99_ms"] for w in measured[-k:]])
    rt_start = _mean([w["round_trip_p99_ms"] for w in measured[:k]])
    rt_end = _mean([w["round_trip_p99_ms"] for w in measured[-k:]])
    out["latency_no_worse"] = {
        "pass": bool(np.isfinite(start) and np.isfinite(end) and end <= start * (1.0 + latency_tolerance)),
        "windows_compared": k, "tolerance": latency_tolerance,
        "controller_p99_start_ms": round(start, 4), "controller_p99_end_ms": round(end, 4),
        "strictly_no_worse": bool(end <= start),
        "round_trip_p99_start_ms": round(rt_start, 3), "round_trip_p99_end_ms": round(rt_end, 3),
        "round_trip_within_tolerance": bool(rt_end <= rt_start * (1.0 + latency_tolerance)),
    }
    out["pass"] = all(out[c]["pass"] for c in ("no_bad_torques", "no_crashes", "memory_growth",
                                               "latency_no_worse"))
    return out



def cpu_summary(windows):
    """Mean over the measured windows of each process's CPU use (% of one core), of the machine's idle
    fraction, of the monitor's CPU per message received (us), and the 1-min load average."""
    measured = [w for w in windows if not w["warmup"]] or windows
    names = list(measured[0].get("cpu_percent", {}))
    out = {k: round(_mean([w["cpu_percent"].get(k) for w in measured]), 1) for k in names}
    out["machine_idle_fraction"] = round(_mean([w.get("machine_idle_fraction") for w in measured]), 3)
    out["monitor_cpu_us_per_message"] = round(_mean([w.get("monitor_cpu_us_per_message") for w in measured]), 1)
    out["load_average_1min"] = round(_mean([w["load_average_1min"] for w in measured]), 2)
    return out


_SHORT = {"simulator": "sim", "estimator": "est", "inverse_dynamics": "ctl", "monitor": "mon"}


def format_row(w):
    rss = " ".join(f"{_SHORT.get(k, k)}={v / 1024:.1f}M" if v else f"{_SHORT.get(k, k)}=?"
                   for k, v in w["rss_kib"].items())
    cpu = " ".join(f"{_SHORT.get(k, k)}={v}" for k, v in w.get("cpu_percent", {}).items())
    return (f"[{w['window']:3d}{'w' if w['warmup'] else ' '}] t={w['t_end_s']:7.1f}s states {w['states_received']}/"
            f"{w['states_expected_wall']} gaps {w['states_dropped_transport']} unanswered {w['states_unanswered']} "
            f"cmds {w['commands_received']} bad {w['nan_commands'] + w['over_limit_commands']} "
            f"ctl p50/p99/max {w['controller_p50_ms']}/{w['controller_p99_ms']}/{w['controller_max_ms']} ms "
            f"rt p50/p99 {w['round_trip_p50_ms']}/{w['round_trip_p99_ms']} ms |q-qd| {w['tracking_error_max_rad']} "
            f"m_est {w['estimator_payload_mass'] and round(w['estimator_payload_mass'], 3)} kg {rss} "
            f"cpu% {cpu} idle {w.get('machine_idle_fraction')} mon {w.get('monitor_cpu_us_per_message')} us/msg "
            f"load {w['load_average_1min']}")


def markdown_table(result):
    """The report's windows as a Markdown table (docs/SOAK.md): drops, latency, tracking, RSS, CPU, load."""
    windows = result["windows"]
    first = {w["window"]: w for w in windows if not w["warmup"]}
    base = next(iter(first.values()), windows[0])["rss_kib"]
    names = list(windows[0]["rss_kib"])
    head = ("| win | states recv / expected | stamp gaps | unanswered | commands | bad τ | max abs(q - q_d) (rad) | "
            "m_est (kg) | ctl p50 / p99 / max (ms) | round trip p50 / p99 (ms) | RSS " + " / ".join(_SHORT[k] for k in names)
            + " (MB) | RSS growth from first measured " + " / ".join(_SHORT[k] for k in names) + " (%) | CPU "
            + " / ".join(_SHORT[k] for k in names) + " (% of a core) | machine idle | monitor us/msg | load 1 min |")
    rows = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for w in windows:
        growth = _growth(base, w["rss_kib"])
        mass = w.get("estimator_payload_mass")
        rows.append(
            f"| {w['window']}{' (warm-up)' if w['warmup'] else ''} | {w['states_received']} / {w['states_expected_wall']} | "
            f"{w['states_dropped_transport']} | {w['states_unanswered']} | {w['commands_received']} | "
            f"{w['nan_commands'] + w['over_limit_commands']} | {w.get('tracking_error_max_rad')} | "
            f"{round(mass, 3) if mass is not None else None} | "
            f"{w['controller_p50_ms']} / {w['controller_p99_ms']} / {w['controller_max_ms']} | "
            f"{w['round_trip_p50_ms']} / {w['round_trip_p99_ms']} | "
            + " / ".join(f"{w['rss_kib'][k] / 1024:.1f}" if w['rss_kib'].get(k) else "?" for k in names) + " | "
            + " / ".join(f"{100 * growth[k]:+.2f}" if growth.get(k) is not None else "?" for k in names) + " | "
            + " / ".join(str(w.get("cpu_percent", {}).get(k)) for k in names)
            + f" | {w.get('machine_idle_fraction')} | {w.get('monitor_cpu_us_per_message')} | {w['load_average_1min']} |")
    return "\n".join(rows)