"""The cockpit's model: what the screen shows, without drawing it. The followed job's timeline,
goodput and hangs (timeline.py, node_timeline.py, rank_group.py), the log buffer, how values read
(format.py) and fit a line (fitting.py), the session with the cluster and the lesson, and the
streams kept open (live.py). Plain Python over backend's types; nothing here imports textual
(a contract in pyproject.toml), so all of it is tested without a screen."""
