"""The front door: the Textual cockpit (app, screens, widgets, .tcss) and the `kfcockpit` CLI.
A thin layer over `backend`: it draws and dispatches, it does not decide."""
