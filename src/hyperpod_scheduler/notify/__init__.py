"""Notifications: blocked stops, capacity shortfalls and failed starts, to SNS and/or a webhook."""
