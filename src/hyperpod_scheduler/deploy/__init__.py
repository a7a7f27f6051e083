"""The scheduler on AWS: Lambda handlers (orchestrator + workers), fleet config, templates, packaging.

The engine is the same one the CLI runs; only the edges differ (DynamoDB store, STS credentials,
SQS fan-out, JSON logs and EMF metrics). See docs/deploy.md.
"""
