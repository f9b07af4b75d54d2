"""Kafka transactions (KIP-98): the transaction coordinator, its state machine and the
`__transaction_state` records. Below the broker: it reaches logs and peers through ports."""
