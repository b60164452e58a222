"""The cockpit screen's responsibilities, one module each; `tui/screens/cockpit.py` composes them."""
