"""`?`: every key (from the one action list) and what each panel shows."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from tui.actions import ACTIONS, key_names

PANELS = """\
## Panels

- **lesson** (left; `h` hides it): one line per step. ○ todo · ◐ running · ✔ done (with evidence) · ✘ failed.
- **step** (under the lesson, in the rows it leaves): from 120x36 up the whole card; smaller, its
  title, *done when* and keys, and `1` or `z` shows it whole.
- From 120x36 up the panels share one screen (pods, logs, timeline, loss); smaller, they are
  tabs (2-6). `z` zooms the focused panel; the focused panel's border is drawn in the accent colour
  and the keys act on it only (enter and v act on the lesson from the checklist or the step card).
- **step card**: why the step matters, its *done when*, the doc to read, the evidence of the last check,
  and for reading steps your note (ctrl+s saves it; the note is the evidence). Its border shows the
  run's newest line; the top bar counts a running step's seconds.
- **pods**: the followed job's worker pods, live: rank, restart attempt, phase, how it ended, last
  step and loss. A killed attempt's pods stay below the new group, failed and dimmed. enter shows
  that pod's logs.
- **logs**: every worker merged, one colour per rank; `r0 + pod` marks a pod's first line, a `────`
  line a worker's failure and a new group's start, and the resumed line is highlighted. Long lines
  wrap. Scrolling up pauses following (the border counts new lines); `f` or `end` follows again.
- **timeline**: each restart from the failure to the first step trained again, every moment with
  its seconds after the failure, the steps lost and the recovery time. Above them, the followed
  job's goodput (the share of its wall time that became progress it kept) and where the rest went:
  lost work, recovery, checkpoint stall, start-up; the top bar shows it too. Zoomed (`z`), the
  attempt ledger: each attempt's start, first step, end and why it ended, and the restarts left of
  the JobSet's budget; enter on one shows its pods' logs (a restarted container's previous one too).
- **checkpoints**: files on the volume (step, loss, world size, size, valid) and its snapshots;
  space marks two snapshots, `c` compares them.
- **loss**: one curve per run, the followed job live.
- **nodes** (`N` opens and closes it): the cluster's nodes, live: Ready (True, False, Unknown), cordoned,
  GPUs, CPU and memory the pods on it request of what it offers, pods; under it the selected node's
  Ready reason and taints. On the selected node: `x` fails its machine and `u` restores it (the
  embedded cluster), `C` cordons or uncordons it; each asks first. The timeline tells what follows.

Jobs keep running when you quit, like on a real cluster. In a browser: `kfcockpit serve`.
"""


def keys_markdown() -> str:
    rows = ["| key | does |", "|---|---|"]
    rows += [f"| `{key_names(a)}` | {a.help} |" for a in ACTIONS]
    rows.append("| `ctrl+p` | The command palette: every action, every step, every job. |")
    return "## Keys\n\n" + "\n".join(rows)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="dialog help"):
            yield Markdown(keys_markdown() + "\n\n" + PANELS, id="help-text")

    def on_mount(self) -> None:
        self.query_one("#dialog").border_title = "help · escape closes"
        self.query_one("#dialog").focus()

    def action_close(self) -> None:
        self.dismiss(None)
