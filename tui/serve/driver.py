"""The web driver the served cockpit runs with (TEXTUAL_DRIVER names it): textual's, plus a
"repaint" request. Textual sends only what changed since the last frame, so a browser that joins
a running cockpit (an audience member, a presenter reloading) would see a blank screen with
scattered updates; a full repaint gives it the whole screen."""

from __future__ import annotations

from textual.drivers.web_driver import WebDriver


class ServedDriver(WebDriver):
    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == "repaint":  # called on the input thread; call_later is thread-safe
            self._app.call_later(self._app.refresh, repaint=True)
            return
        super().on_meta(packet_type, payload)
