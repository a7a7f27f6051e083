"""The state store: recorded sizes, last applied state, action history, leases."""
