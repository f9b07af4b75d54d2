"""Transactions (KIP-98): the transaction coordinator and its state machine, kept in
`__transaction_state`."""

from .coordinator import TXN_STATE_TOPIC, MarkerWriter, TransactionCoordinator, TxnSettings, TxnStateLog

__all__ = ["TXN_STATE_TOPIC", "MarkerWriter", "TransactionCoordinator", "TxnSettings", "TxnStateLog"]
