"""The cockpit's screens: the main cockpit and the small dialogs it opens."""
