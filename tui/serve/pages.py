"""The HTML of browser mode. The terminal itself is textual-serve's page script (textual.js, with
xterm.js inside) served from its package; the page around it is ours: it connects at once (no
start button), uses a projector-sized font (on the presenter's page the largest that still gives
the one-screen dashboard in the window), says in words why a connection closed, and on the
audience page scales the presenter's screen to fit each viewer's window."""

from __future__ import annotations

import html

CONTROL_FONT_SIZE = 20  # cells readable from the back of a room, at most; ?fontsize= sets it outright
SMALLEST_FONT_SIZE = 18  # the presenter's font is made no smaller than this to fit the dashboard
DASHBOARD_CELLS = (120, 36)  # tui/screens/panels.py's GRID_MIN: from here every panel is on one screen
AUDIENCE_FONT_SIZE = 16  # the audience page scales the presenter's screen to the window anyway

# Before textual.js: wraps WebSocket to learn the cells the terminal fitted (the "resize" it
# sends) and the presenter's cells ("stage_size" from the server), and to show close reasons.
_PAGE_SCRIPT = """
(() => {
  const Native = window.WebSocket;
  const audience = document.documentElement.dataset.role === "audience";
  const state = window.__kfcockpit = {stage: null, fitted: null, closed: null};

  function fitToStage() {
    const box = document.getElementById("terminal");
    const screen = box.querySelector(".xterm-screen");
    const {stage, fitted} = state;
    if (!audience || !stage || !fitted || !screen || !screen.offsetWidth) return;
    const cellWidth = screen.offsetWidth / fitted.width;
    const cellHeight = screen.offsetHeight / fitted.height;
    const width = (stage.width + 0.5) * cellWidth, height = (stage.height + 0.5) * cellHeight;
    const scale = Math.min(innerWidth / width, innerHeight / height);
    Object.assign(box.style, {width: width + "px", height: height + "px",
      left: Math.max(0, (innerWidth - width * scale) / 2) + "px",
      transform: "scale(" + scale + ")"});
    // The terminal must have the presenter's cells exactly, or lines wrap: re-fit it.
    if (fitted.width !== stage.width || fitted.height !== stage.height) window.onresize();
  }
  addEventListener("resize", fitToStage);

  window.WebSocket = function (...args) {
    const socket = new Native(...args);
    const send = socket.send.bind(socket);
    socket.send = data => {
      const message = JSON.parse(data);
      if (message[0] === "resize") { state.fitted = message[1]; fitToStage(); }
      send(data);
    };
    socket.addEventListener("message", event => {
      if (typeof event.data !== "string") return;
      const message = JSON.parse(event.data);
      if (message[0] === "stage_size") { state.stage = message[1]; fitToStage(); }
    });
    socket.addEventListener("close", event => {
      state.closed = {code: event.code, reason: event.reason};
      document.getElementById("notice-text").textContent =
        event.reason || "The connection to the cockpit was lost.";
    });
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();
"""

_STYLE = """
html, body { margin: 0; height: 100%; overflow: hidden; background: #0c181f; }
#terminal { position: absolute; top: 0; left: 0; width: 100vw; height: 100vh;
            transform-origin: 0 0; }
#notice { display: none; position: fixed; inset: 0; z-index: 10; background: rgba(12, 24, 31, .94);
          color: #f0f0f0; font: 28px/1.5 sans-serif; align-items: center; justify-content: center;
          flex-direction: column; text-align: center; padding: 2em; }
body.-closed #notice { display: flex; }
/* scrollback is 0: a scrollbar would only show as a stripe beside the screen */
.xterm .xterm-viewport { overflow-y: hidden !important; background-color: #0c181f !important; }
#notice button { font: inherit; margin-top: 1em; padding: .3em 1.2em; }
"""

_COCKPIT_PAGE = """<!DOCTYPE html>
<html data-role="@ROLE@">
<head>
<meta charset="utf-8">
<title>@TITLE@</title>
<link rel="stylesheet" href="/static/css/xterm.css">
<style>@STYLE@</style>
<script>@SCRIPT@</script>
<script src="/static/js/textual.js"></script>
</head>
<body>
<div id="terminal" class="textual-terminal" data-font-size="@FONT@"></div>
<div id="notice"><div id="notice-text"></div>
<button type="button" onclick="location.reload()">Open again</button></div>
<script>
document.getElementById("terminal").dataset.sessionWebsocketUrl =
  (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "@SOCKET@";
@FIT@
</script>
</body>
</html>
"""

# Before textual.js builds the terminal (on load, from data-font-size): the presenter's font is
# the largest, up to the page's and down to SMALLEST_FONT_SIZE, at which the window holds the
# dashboard's cells. At 1400x900 the
# room's 20px gave 116 columns, and so tabs instead of the one screen. The cell is measured in
# textual.js's own font; ?fontsize= is the presenter's choice and is kept.
_FIT_SCRIPT = """
(() => {
  const box = document.getElementById("terminal");
  const chosen = new URLSearchParams(location.search).has("fontsize");
  if (document.documentElement.dataset.role !== "control" || chosen) return;
  const context = document.createElement("canvas").getContext("2d");
  context.font = "100px 'Roboto Mono', Monaco, 'Courier New', monospace";
  const sample = context.measureText("WWWWWWWWWW");
  const wide = sample.width / 1000;
  const tall = (sample.fontBoundingBoxAscent + sample.fontBoundingBoxDescent) / 100 || 1.2;
  const fits = Math.floor(Math.min(innerWidth / ((@COLUMNS@ + 1) * wide), innerHeight / ((@ROWS@ + 1) * tall)));
  // Smaller than the room can read, the dashboard is not worth it: the tabs at the page's size.
  if (fits >= @SMALLEST@) box.dataset.fontSize = String(Math.min(Number(box.dataset.fontSize), fits));
})();
"""

_MESSAGE_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>kfcockpit</title>
<style>body { background: #0c181f; color: #f0f0f0; font: 28px/1.5 sans-serif; margin: 3em; }</style>
</head><body><h1>@HEADING@</h1><p>@TEXT@</p></body></html>
"""


def cockpit_page(role: str, socket_path: str, font_size: int) -> str:
    title = "kfcockpit (audience)" if role == "audience" else "kfcockpit"
    return (_COCKPIT_PAGE.replace("@STYLE@", _STYLE).replace("@SCRIPT@", _PAGE_SCRIPT)
            .replace("@ROLE@", role).replace("@TITLE@", title)
            .replace("@FONT@", str(int(font_size))).replace("@SOCKET@", html.escape(socket_path))
            .replace("@FIT@", _FIT_SCRIPT.replace("@COLUMNS@", str(DASHBOARD_CELLS[0]))
                     .replace("@ROWS@", str(DASHBOARD_CELLS[1])).replace("@SMALLEST@", str(SMALLEST_FONT_SIZE))))


def message_page(heading: str, text: str) -> str:
    return _MESSAGE_PAGE.replace("@HEADING@", html.escape(heading)).replace("@TEXT@", html.escape(text))


_FIRST_VISIT_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>kfcockpit</title>
<meta http-equiv="refresh" content="0; url=@URL@">
</head><body style="background: #0c181f"></body></html>
"""


def first_visit_page(address: str) -> str:
    """Sent with the token's cookie: it opens `address` (the page without the token) itself.
    A 303 would not do: a SameSite=Strict cookie is not sent on a redirect that a link on another
    site (a chat, a QR reader) started, but it is on a navigation this page starts."""
    return _FIRST_VISIT_PAGE.replace("@URL@", html.escape(address))


FORBIDDEN = message_page(
    "This cockpit needs its full address",
    "Open the address kfcockpit serve printed, with its ?token=… part. Ask the presenter for it.")

FOREIGN = message_page(
    "This cockpit opens only at its own address",
    "The request came from another site or named this server by another name. Open the address "
    "kfcockpit serve printed.")
