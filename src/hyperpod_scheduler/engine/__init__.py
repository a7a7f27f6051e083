"""The scheduler engine: plan and apply stop/start transitions through UpdateCluster."""
