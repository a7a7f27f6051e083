"""What every face (CLI, dashboard, Lambda, demo) builds on: the composition root and the views they show."""
