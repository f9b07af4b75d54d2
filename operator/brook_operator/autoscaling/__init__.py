"""Metrics-driven broker autoscaling (Cluster.spec.autoscaling).

Pure rooms: `decide` (replica count from metrics, HPA-style: ratio to target, tolerance, stabilization
windows, cooldown, bounds with the largest replication factor as a floor), `planner` (partition moves
that balance replicas and leaders over a broker set with few moves), `operation` (the steps of a
scale-out or scale-in: grow, then move partitions on; move partitions off, then shrink) and `report`
(state ⇄ status, conditions, Events). `flow` runs one pass through protocols (Prometheus, Kafka);
`brook_operator.prometheus` is the HTTP client and `handlers.autoscaling` the kopf timer.
"""
