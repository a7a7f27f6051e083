"""The scheduler's YAML config file: schedules, defaults and the clusters they govern."""
