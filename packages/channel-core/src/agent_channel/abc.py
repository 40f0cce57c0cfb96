"""The interfaces, in one place: what a producer holds, what answers an execution's
requests, what a store implements. Implement these to plug in another runtime's ref,
another approver or another database; the shipped ones satisfy them."""

from ._abc import Approver, Children, ExecutionRef, Resolver, SteerReceipt, Subscriber
from ._store import Journal, Restored, Store, StoreBusy, StoredExecution, StoreError

__all__ = [
    "Approver",
    "Children",
    "ExecutionRef",
    "Journal",
    "Resolver",
    "Restored",
    "SteerReceipt",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoredExecution",
    "Subscriber",
]
