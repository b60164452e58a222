"""Browser mode (`kfcockpit serve`): cockpits run as child processes speaking textual's web driver
protocol, shown in browsers over websockets by a small aiohttp server.

- `access`: who may open what (tokens on any non-loopback bind, loopback open).
- `protocol`: the web driver's packets on a child's stdin/stdout.
- `process`: one cockpit child; `session`: that child shown on one controlling socket and any
  number of read-only ones (audience mode: one cockpit rendered to many, not one per viewer).
- `pages`: the HTML; `server`: routes, the session limit, start and stop.

Nothing here is imported before `kfcockpit serve` runs: the cockpit's own start-up stays light.
"""
