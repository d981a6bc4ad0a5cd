static inline void rdl_cross3(const double *a, const double *b, double *out)
{
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* v x m (motion cross product) */
static inline void rdl_crm(const double *v, const double *m, double *out)
{
    double t1[3], t2[3], t3[3];
    rdl_cross3(v + 3, m, t1);
    rdl_cross3(v, m + 3, t2);
    rdl_cross3(v + 3, m + 3, t3);
    for (int k = 0; k < 3; k++) { out[k] = t1[k] + t2[k]; out[3 + k] = t3[k]; }
}

/* v x* f (force cross product) */
static inline void rdl_crf(const double *v, const double *f, double *out)
{
    double t1[3], t2[3], t3[3];
    rdl_cross3(v + 3, f, t1);
    rdl_cross3(v + 3, f + 3, t2);
    rdl_cross3(v, f, t3);
    for (int k = 0; k < 3; k++) { out[k] = t1[k]; out[3 + k] = t2[k] + t3[k]; }
}

static inline void rdl_mat6_vec(const double *A, const double *x, double *out)
{
    for (int r = 0; r < 6; r++) {
        double s = 0.0;
        for (int c = 0; c < 6; c++) s += A[6 * r + c] * x[c];
        out[r] = s;
    }
}

static inline void rdl_mat6T_vec(const double *A, const double *x, double *out)
{
    for (int c = 0; c < 6; c++) out[c] = 0.0;
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 6; c++) out[c] += A[6 * r + c] * x[r];
}

static inline double rdl_dot6(const double *a, const double *b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5];
}

/* The joint placement exp([S] theta) of a 1-DoF joint, then (R, p) of the child in the parent body. */
static void rdl_parent_placement(int i, double theta, double *R, double *p)
{
    const double *t = rdl_twist[i], *R0 = rdl_R0[i], *p0 = rdl_p0[i];
    double RJ[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, pJ[3];
    if (rdl_rotational[i][0]) {
        const double *w = t + 3, *v = t;
        double c = cos(theta), s = sin(theta), d = 1.0 - c;
        RJ[0] = c + d * w[0] * w[0];        RJ[1] = d * w[0] * w[1] - s * w[2]; RJ[2] = d * w[0] * w[2] + s * w[1];
        RJ[3] = d * w[1] * w[0] + s * w[2]; RJ[4] = c + d * w[1] * w[1];        RJ[5] = d * w[1] * w[2] - s * w[0];
        RJ[6] = d * w[2] * w[0] - s * w[1]; RJ[7] = d * w[2] * w[1] + s * w[0]; RJ[8] = c + d * w[2] * w[2];
        double wv[3], wdv = w[0] * v[0] + w[1] * v[1] + w[2] * v[2];
        rdl_cross3(w, v, wv);
        for (int r = 0; r < 3; r++) {
            double Rwv = RJ[3 * r] * wv[0] + RJ[3 * r + 1] * wv[1] + RJ[3 * r + 2] * wv[2];
            pJ[r] = wv[r] - Rwv + w[r] * wdv * theta;
        }
    } else {
        for (int r = 0; r < 3; r++) pJ[r] = t[r] * theta;
    }
    for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 3; c++)
            R[3 * r + c] = R0[3 * r] * RJ[c] + R0[3 * r + 1] * RJ[3 + c] + R0[3 * r + 2] * RJ[6 + c];
        p[r] = p0[r] + R0[3 * r] * pJ[0] + R0[3 * r + 1] * pJ[1] + R0[3 * r + 2] * pJ[2];
    }
}

/* (m, h, Ib) of the 10 inertial parameters pi = [m, hx, hy, hz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz], Ib row-major
   (not "I": complex.h, which NumPy's headers include, defines it). */
static void rdl_params(const double *pi, double *m, double *h, double *Ib)
{
    *m = pi[0];
    h[0] = pi[1]; h[1] = pi[2]; h[2] = pi[3];
    Ib[0] = pi[4]; Ib[1] = pi[5]; Ib[2] = pi[7];
    Ib[3] = pi[5]; Ib[4] = pi[6]; Ib[5] = pi[8];
    Ib[6] = pi[7]; Ib[7] = pi[8]; Ib[8] = pi[9];
}

/* The 6x6 spatial inertia [[m 1, -[h]], [[h], Ib]]. */
static void rdl_inertia6(double m, const double *h, const double *Ib, double *I6)
{
    for (int k = 0; k < 36; k++) I6[k] = 0.0;
    I6[0] = I6[7] = I6[14] = m;
    /* -[h] top right, [h] bottom left */
    I6[4] = h[2];  I6[5] = -h[1]; I6[9] = -h[2]; I6[11] = h[0]; I6[15] = h[1]; I6[16] = -h[0];
    I6[19] = -h[2]; I6[20] = h[1]; I6[24] = h[2]; I6[26] = -h[0]; I6[30] = -h[1]; I6[31] = h[0];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) I6[6 * (3 + r) + 3 + c] = Ib[3 * r + c];
}

/* Ground-frame 6x6 inertia of body i placed at (R, p): h' = R h + m p, I' = R I R^T - m [p]^2 - [R h][p] - [p][R h]. */
static void rdl_ground_inertia(int i, const double *R, const double *p, double *I6)
{
    double m, hb[3], Ib[9], Rh[3], h[3], RI[9], Ig[9];
    rdl_params(rdl_pi[i], &m, hb, Ib);
    for (int r = 0; r < 3; r++) Rh[r] = R[3 * r] * hb[0] + R[3 * r + 1] * hb[1] + R[3 * r + 2] * hb[2];
    for (int r = 0; r < 3; r++) h[r] = Rh[r] + m * p[r];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            RI[3 * r + c] = R[3 * r] * Ib[c] + R[3 * r + 1] * Ib[3 + c] + R[3 * r + 2] * Ib[6 + c];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            Ig[3 * r + c] = RI[3 * r] * R[3 * c] + RI[3 * r + 1] * R[3 * c + 1] + RI[3 * r + 2] * R[3 * c + 2];
    /* - m [p]^2 - [Rh][p] - [p][Rh], with [a][b] = b a^T - (a.b) 1 */
    double pp = p[0] * p[0] + p[1] * p[1] + p[2] * p[2], hp = Rh[0] * p[0] + Rh[1] * p[1] + Rh[2] * p[2];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            Ig[3 * r + c] += -m * (p[c] * p[r] - (r == c) * pp) - (p[r] * Rh[c] + Rh[r] * p[c] - 2.0 * (r == c) * hp);
    rdl_inertia6(m, h, Ig, I6);
}

/* B = (v x*) I - I (v x) + ((I v) xbar*) = X + X^T + G(I v) with X = (v x*) I, since I (v x) = -((v x*) I)^T for
   a symmetric I, and G(f) (G(f) u = u x* f) = -[[0, [f_lin]], [[f_lin], [f_ang]]]. */
static void rdl_body_coriolis(const double *I6, const double *v, double *B)
{
    double X[36], col[6], Xc[6], Iv[6];
    for (int c = 0; c < 6; c++) {
        for (int k = 0; k < 6; k++) col[k] = I6[6 * k + c];
        rdl_crf(v, col, Xc);
        for (int r = 0; r < 6; r++) X[6 * r + c] = Xc[r];
    }
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 6; c++) B[6 * r + c] = X[6 * r + c] + X[6 * c + r];
    rdl_mat6_vec(I6, v, Iv);
    const double *f = Iv, *n = Iv + 3;
    /* subtract [[0, [f]], [[f], [n]]]: [a] = [[0, -a2, a1], [a2, 0, -a0], [-a1, a0, 0]] */
    B[4] += f[2];  B[5] -= f[1];  B[9] -= f[2];  B[11] += f[0]; B[15] += f[1]; B[16] -= f[0];
    B[19] += f[2]; B[20] -= f[1]; B[24] -= f[2]; B[26] += f[0]; B[30] += f[1]; B[31] -= f[0];
    B[22] += n[2]; B[23] -= n[1]; B[27] -= n[2]; B[29] += n[0]; B[33] += n[1]; B[34] -= n[0];
}

static const double rdl_zero6[6] = {0, 0, 0, 0, 0, 0};

/* Body i in ground coordinates: its placement (oR[i], op[i]) from its parent's and its joint column S[i]. */
static void rdl_place(int i, const double *q, double (*oR)[9], double (*op)[3], double (*S)[6])
{
    int lam = rdl_parent[i][0];
    double R[9], p[3];
    rdl_parent_placement(i, q[rdl_dof[i][0]], R, p);
    if (lam < 0) {
        memcpy(oR[i], R, sizeof R); memcpy(op[i], p, sizeof p);
    } else {
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 3; c++)
                oR[i][3 * r + c] = oR[lam][3 * r] * R[c] + oR[lam][3 * r + 1] * R[3 + c] + oR[lam][3 * r + 2] * R[6 + c];
            op[i][r] = op[lam][r] + oR[lam][3 * r] * p[0] + oR[lam][3 * r + 1] * p[1] + oR[lam][3 * r + 2] * p[2];
        }
    }
    const double *t = rdl_twist[i], *Ri = oR[i];
    double ang[3], pxa[3];
    for (int r = 0; r < 3; r++) {
        ang[r] = Ri[3 * r] * t[3] + Ri[3 * r + 1] * t[4] + Ri[3 * r + 2] * t[5];
        S[i][r] = Ri[3 * r] * t[0] + Ri[3 * r + 1] * t[1] + Ri[3 * r + 2] * t[2];
    }
    rdl_cross3(op[i], ang, pxa);
    for (int r = 0; r < 3; r++) { S[i][r] += pxa[r]; S[i][3 + r] = ang[r]; }
}

/* v_i = v_lam + S_i qd_i and a_i = a_lam + S_i qdd_i + v_i x S_i qd_i of body i (qdd NULL: a not wanted). */
static void rdl_motion(int i, const double *qd, const double *qdd, double (*S)[6], double (*vel)[6], double (*acc)[6])
{
    int lam = rdl_parent[i][0], d = rdl_dof[i][0];
    const double *vl = lam < 0 ? rdl_zero6 : vel[lam];
    double vJ[6], t1[6];
    for (int k = 0; k < 6; k++) { vJ[k] = S[i][k] * qd[d]; vel[i][k] = vl[k] + vJ[k]; }
    if (qdd == NULL)
        return;
    const double *al = lam < 0 ? rdl_a0[0] : acc[lam];
    rdl_crm(vel[i], vJ, t1);
    for (int k = 0; k < 6; k++) acc[i][k] = al[k] + S[i][k] * qdd[d] + t1[k];
}

/* in: q, qd, qdd (nv); out: dtau/dq, dtau/dqd, M (nv x nv, row-major). */
static void rdl_idsva(const double **in, double **out)
{
    const double *q = in[0], *qd = in[1], *qdd = in[2];
    double *dq = out[0], *dv = out[1], *M = out[2];
    const int n = RDL_N, nv = RDL_N;
    double oR[RDL_N][9], op[RDL_N][3], S[RDL_N][6], Psi[RDL_N][6], Psid[RDL_N][6], A[RDL_N][6];  /* on the stack: reentrant */
    double vel[RDL_N][6], acc[RDL_N][6], F[RDL_N][6], Ic[RDL_N][36], Bc[RDL_N][36];
    memset(dq, 0, sizeof(double) * nv * nv);
    memset(dv, 0, sizeof(double) * nv * nv);
    memset(M, 0, sizeof(double) * nv * nv);
    for (int i = 0; i < n; i++) {                          /* forward pass */
        int lam = rdl_parent[i][0];
        rdl_place(i, q, oR, op, S);
        const double *vl = lam < 0 ? rdl_zero6 : vel[lam], *al = lam < 0 ? rdl_a0[0] : acc[lam];
        double t1[6], t2[6];
        rdl_motion(i, qd, qdd, S, vel, acc);
        rdl_crm(vl, S[i], Psi[i]);
        rdl_crm(vel[i], S[i], t1);
        for (int k = 0; k < 6; k++) Psid[i][k] = t1[k] + Psi[i][k];
        rdl_crm(al, S[i], t1);
        rdl_crm(vl, Psi[i], t2);
        for (int k = 0; k < 6; k++) A[i][k] = t1[k] + t2[k];
        rdl_ground_inertia(i, oR[i], op[i], Ic[i]);
        double Ia[6], Iv[6];
        rdl_mat6_vec(Ic[i], acc[i], Ia);
        rdl_mat6_vec(Ic[i], vel[i], Iv);
        rdl_crf(vel[i], Iv, t1);
        for (int k = 0; k < 6; k++) F[i][k] = Ia[k] + t1[k];
        rdl_body_coriolis(Ic[i], vel[i], Bc[i]);
    }
    for (int i = n - 1; i >= 0; i--) {                     /* backward pass */
        int lam = rdl_parent[i][0], di = rdl_dof[i][0];
        double P[6], Q[6];
        rdl_mat6T_vec(Bc[i], S[i], P);
        rdl_mat6_vec(Ic[i], S[i], Q);
        double *dq_i = dq + di * nv, *dv_i = dv + di * nv, *M_i = M + di * nv;
        for (int k = i; k >= 0; k = rdl_parent[k][0]) {     /* k = i and its ancestors */
            int dk = rdl_dof[k][0];
            dq_i[dk] = rdl_dot6(P, Psi[k]) + rdl_dot6(Q, A[k]);
            dv_i[dk] = rdl_dot6(P, S[k]) + rdl_dot6(Q, Psid[k]);
            M_i[dk] = rdl_dot6(Q, S[k]);
        }
        M_i[di] += rdl_armature[i][0];
        if (lam < 0)
            continue;
        double E[6], D[6], t1[6], t2[6];
        rdl_crf(S[i], F[i], E);
        rdl_mat6_vec(Ic[i], A[i], t1);
        rdl_mat6_vec(Bc[i], Psi[i], t2);
        for (int k = 0; k < 6; k++) E[k] += t1[k] + t2[k];
        rdl_mat6_vec(Bc[i], S[i], t1);
        rdl_mat6_vec(Ic[i], Psid[i], t2);
        for (int k = 0; k < 6; k++) D[k] = t1[k] + t2[k];
        for (int k = lam; k >= 0; k = rdl_parent[k][0]) {   /* the strict ancestors */
            int dk = rdl_dof[k][0];
            dq[dk * nv + di] = rdl_dot6(S[k], E);
            dv[dk * nv + di] = rdl_dot6(S[k], D);
            M[dk * nv + di] = M_i[dk];
        }
        for (int k = 0; k < 36; k++) { Ic[lam][k] += Ic[i][k]; Bc[lam][k] += Bc[i][k]; }
        for (int k = 0; k < 6; k++) F[lam][k] += F[i][k];
    }
}

/* in: q (nv); out: M (nv x nv), armature included (CRBA in ground coordinates: M_ik = (I^C_i S_i).S_k, k ancestor of i). */
static void rdl_crba(const double **in, double **out)
{
    const double *q = in[0];
    double *M = out[0];
    const int n = RDL_N, nv = RDL_N;
    double oR[RDL_N][9], op[RDL_N][3], S[RDL_N][6], Ic[RDL_N][36];
    memset(M, 0, sizeof(double) * nv * nv);
    for (int i = 0; i < n; i++) {
        rdl_place(i, q, oR, op, S);
        rdl_ground_inertia(i, oR[i], op[i], Ic[i]);
    }
    for (int i = n - 1; i >= 0; i--) {
        int lam = rdl_parent[i][0], di = rdl_dof[i][0];
        double Q[6];
        rdl_mat6_vec(Ic[i], S[i], Q);
        for (int k = i; k >= 0; k = rdl_parent[k][0]) {
            int dk = rdl_dof[k][0];
            M[di * nv + dk] = M[dk * nv + di] = rdl_dot6(Q, S[k]);
        }
        M[di * nv + di] += rdl_armature[i][0];
        if (lam >= 0)
            for (int k = 0; k < 36; k++) Ic[lam][k] += Ic[i][k];
    }
}

/* in: q, qd (nv); out: C (nv x nv), Christoffel-consistent: C = sum_b J_b^T (I_b dJ_b + B_b / 2 J_b) with
   the columns S_k of J_b moving as dS_k = v_k x S_k and B_b / 2 the body-level Coriolis matrix (eq. 28), so
   C_ik = (I^C_i S_i).dS_k + (B^C_i^T S_i / 2).S_k for k ancestor of i (or i), C_ki = S_k.(I^C_i dS_i + B^C_i S_i / 2). */
static void rdl_coriolis(const double **in, double **out)
{
    const double *q = in[0], *qd = in[1];
    double *C = out[0];
    const int n = RDL_N, nv = RDL_N;
    double oR[RDL_N][9], op[RDL_N][3], S[RDL_N][6], dS[RDL_N][6], vel[RDL_N][6], Ic[RDL_N][36], Bc[RDL_N][36];
    memset(C, 0, sizeof(double) * nv * nv);
    for (int i = 0; i < n; i++) {
        rdl_place(i, q, oR, op, S);
        rdl_motion(i, qd, NULL, S, vel, NULL);
        rdl_crm(vel[i], S[i], dS[i]);
        rdl_ground_inertia(i, oR[i], op[i], Ic[i]);
        rdl_body_coriolis(Ic[i], vel[i], Bc[i]);
        for (int k = 0; k < 36; k++) Bc[i][k] *= 0.5;
    }
    for (int i = n - 1; i >= 0; i--) {
        int lam = rdl_parent[i][0], di = rdl_dof[i][0];
        double P[6], Q[6], E[6], t1[6];
        rdl_mat6T_vec(Bc[i], S[i], P);
        rdl_mat6_vec(Ic[i], S[i], Q);
        for (int k = i; k >= 0; k = rdl_parent[k][0])
            C[di * nv + rdl_dof[k][0]] = rdl_dot6(Q, dS[k]) + rdl_dot6(P, S[k]);
        if (lam < 0)
            continue;
        rdl_mat6_vec(Ic[i], dS[i], E);
        rdl_mat6_vec(Bc[i], S[i], t1);
        for (int k = 0; k < 6; k++) E[k] += t1[k];
        for (int k = lam; k >= 0; k = rdl_parent[k][0])
            C[rdl_dof[k][0] * nv + di] = rdl_dot6(S[k], E);
        for (int k = 0; k < 36; k++) { Ic[lam][k] += Ic[i][k]; Bc[lam][k] += Bc[i][k]; }
    }
}

/* in: q, qd, qdd (nv); out: Y (nv x 10 nbodies) with Y pi = rnea - armature term. Body b's wrench
   f_b = I_b a_b + v_b x* I_b v_b is linear in its parameters pi_b (body frame): column c of Y_b is f_b for
   the unit vector e_c as pi_b, taken in the body frame and moved to ground; Y[i, 10 b + c] = S_i.(that)
   for every ancestor i of b (and b). */
static void rdl_regressor(const double **in, double **out)
{
    const double *q = in[0], *qd = in[1], *qdd = in[2];
    double *Y = out[0];
    const int n = RDL_N, nv = RDL_N, ncol = 10 * RDL_N;
    double oR[RDL_N][9], op[RDL_N][3], S[RDL_N][6], vel[RDL_N][6], acc[RDL_N][6];
    memset(Y, 0, sizeof(double) * nv * ncol);
    for (int b = 0; b < n; b++) {
        rdl_place(b, q, oR, op, S);
        rdl_motion(b, qd, qdd, S, vel, acc);
        const double *R = oR[b], *p = op[b];
        double vb[6], ab[6], x[3];
        /* v, a in the body frame: ang' = R^T ang, lin' = R^T (lin - p x ang) */
        for (int m = 0; m < 2; m++) {
            const double *g = m ? acc[b] : vel[b];
            double *l = m ? ab : vb;
            rdl_cross3(p, g + 3, x);
            for (int r = 0; r < 3; r++) {
                l[3 + r] = R[r] * g[3] + R[3 + r] * g[4] + R[6 + r] * g[5];
                l[r] = R[r] * (g[0] - x[0]) + R[3 + r] * (g[1] - x[1]) + R[6 + r] * (g[2] - x[2]);
            }
        }
        double Yg[10][6];
        for (int c = 0; c < 10; c++) {
            double e[10] = {0}, m, h[3], Ib[9], I6[36], f[6], t1[6], Iv[6], fl[3];
            e[c] = 1.0;
            rdl_params(e, &m, h, Ib);
            rdl_inertia6(m, h, Ib, I6);
            rdl_mat6_vec(I6, ab, f);
            rdl_mat6_vec(I6, vb, Iv);
            rdl_crf(vb, Iv, t1);
            for (int k = 0; k < 6; k++) f[k] += t1[k];
            /* to ground: lin = R f_lin, ang = R f_ang + p x (R f_lin) */
            for (int r = 0; r < 3; r++) {
                Yg[c][r] = R[3 * r] * f[0] + R[3 * r + 1] * f[1] + R[3 * r + 2] * f[2];
                Yg[c][3 + r] = R[3 * r] * f[3] + R[3 * r + 1] * f[4] + R[3 * r + 2] * f[5];
            }
            rdl_cross3(p, Yg[c], fl);
            for (int r = 0; r < 3; r++) Yg[c][3 + r] += fl[r];
        }
        for (int i = b; i >= 0; i = rdl_parent[i][0]) {
            double *row = Y + rdl_dof[i][0] * ncol + 10 * b;
            for (int c = 0; c < 10; c++) row[c] = rdl_dot6(S[i], Yg[c]);
        }
    }
}
