"""The Slurm side of scheduled stops and starts: checkpoint audit, the agent on the controller, and the
channel it shares with the scheduler (docs/checkpoints.md).

Import from the module that defines a name (``agent.channel``, ``agent.settings``, ...): the config
model imports ``agent.settings``, and a package that imported all of its modules pulled the agent's
worker, Slurm parsing and messages into every command that reads a config."""
