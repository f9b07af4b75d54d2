"""Security: who a connection is (TLS, SASL), what a principal may do (ACLs), how much it may take
(quotas, connection limits). Below the broker: it reaches storage through ports the broker provides."""
