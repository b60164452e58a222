"""Widgets that each own their state; the cockpit screen calls their methods and hears their messages."""
