"""The rclpy entities of a :class:`~robodyn_ros.ros.base_node.RobodynNode`: taking the messages waiting in a
subscription's queue, and destroying what a node created."""


def take_pending(subscription, limit, sequences=None):
    """The messages waiting in ``subscription``'s queue (oldest first, at most ``limit``), taken now;
    ``sequences``: a list that gets ``(publisher GID bytes, publication sequence number or None)`` of each,
    for :class:`~robodyn_ros.estimation.message_loss.PublicationGaps`.

    For a node slower than its input: rclpy's EventsExecutor queues one event per arriving message
    without bound (measured: ~230 kB/s of native memory at 2 kHz input with a 5-ms callback; flat with
    SingleThreadedExecutor, whose backlog is the subscription's keep-last depth). A callback that takes
    the messages already waiting leaves those events nothing to take, and the executor discards them
    without calling Python, so the backlog stays within the QoS depth."""
    taken = []
    with subscription.handle:
        while len(taken) < limit:
            got = subscription.handle.take_message(subscription.msg_type, subscription.raw)
            if got is None:
                break
            taken.append(got[0])
            if sequences is not None:
                info = got[1]
                gid = info.get("publisher_gid")
                # 0 is the RMW's "unsupported"; DDS numbers from 1
                sequences.append((bytes(gid["data"]) if gid else None, info.get("publication_sequence_number") or None))
    return taken


def destroy_rclpy_entity(node, entity):
    """Destroy a timer, subscription (polled ones included), publisher or service of ``node``."""
    from rclpy.publisher import Publisher
    from rclpy.service import Service
    from rclpy.subscription import Subscription
    from rclpy.timer import Timer
    if isinstance(entity, Timer):
        entity.cancel()
        node.destroy_timer(entity)
    elif isinstance(entity, Subscription):
        if getattr(entity, "robodyn_polled", False):
            node._subscriptions.append(entity)   # RobodynNode.polled_sub took it out of the node's list
        node.destroy_subscription(entity)
    elif isinstance(entity, Publisher):
        node.destroy_publisher(entity)
    elif isinstance(entity, Service):
        node.destroy_service(entity)


def destroy_entities(node):
    """Destroy everything ``node`` created through its ``sub``, ``polled_sub``, ``pub``, ``srv`` and ``timer``
    (newest first)."""
    for entity in reversed(node._entities):
        destroy_rclpy_entity(node, entity)
    node._entities.clear()
