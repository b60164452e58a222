"""Every action of the cockpit, once: its key, its footer label and what it does. The screen's
bindings, the footer, the help screen and the command palette are all built from this list, so
a key can never do one thing and be documented as another."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from rich.cells import cell_len
from textual.binding import Binding

from tui.model.fitting import fit_fields

STEP_GROUP = Binding.Group("step")
TAB_GROUP = Binding.Group("tabs", compact=True)


@dataclass(frozen=True)
class Action:
    action: str  # an action of the cockpit screen (what `action_<name>` does)
    key: str  # Textual key names, comma-separated for alternatives
    label: str  # short: the footer shows it at 80 columns
    title: str  # the command palette's entry
    help: str  # one sentence for the help screen and the palette
    footer: bool = True
    priority: bool = False  # fires even when an input box has focus
    key_display: str | None = None
    group: Binding.Group | None = None
    # The narrowest terminal whose footer shows it (the key works at any width): at 80 columns
    # every label must fit beside the palette's, whole.
    footer_from: int = 0
    # The view whose keys these are (a panel's name): they work, and the footer shows them, only
    # while it is shown; while it is, the footer shows its keys and the few that work everywhere.
    view: str | None = None


ACTIONS: tuple[Action, ...] = (
    Action("run_step", "enter", "Run", "Run the selected step",
           "Do the selected step's action (launch a job, a pipeline…), then check its done-when.",
           key_display="⏎"),
    Action("verify_step", "v", "Verify", "Verify the selected step",
           "Check the selected step's done-when now and keep the evidence."),
    Action("next_step", "n", "Next", "Next step", "Select the next step of the lesson.",
           group=STEP_GROUP),
    Action("previous_step", "p", "Prev", "Previous step", "Select the previous step of the lesson.",
           group=STEP_GROUP),
    Action("edit_note", "e", "Note", "Write the step's note",
           "Into the selected step's note (reading steps, and step 7's reading of its runs); "
           "ctrl+s saves and checks it, escape gives the keys back.", footer=False),
    Action("measure", "m", "Measure", "Measure the Trainer against Ray Train (kfcockpit compare)",
           "Step 10's comparison, measured: the same loop as a TrainJob and as a RayJob, a worker "
           "killed in each; the table is quoted in step 10's note.", footer=False),
    Action("kill_pod", "ctrl+k", "Kill", "Kill the selected pod",
           "Kill the pod under the cursor in the pods panel (asks first): the group restarts and "
           "resumes from its last checkpoint.", priority=True, key_display="^k"),
    Action("freeze_pod", "F", "Freeze", "Freeze or thaw the selected pod",
           "On the embedded cluster: stop every process of the pod under the cursor (a hung rank to "
           "practise on: Running, silent, its peers waiting), or continue them.", footer=False),
    Action("restart_group", "R", "Restart", "Restart the followed job's group",
           "Delete every running pod of the followed job's newest group (asks first): a hung group "
           "restarts now instead of waiting out its collective timeout, and resumes from its last "
           "checkpoint.", footer=False),
    Action("show_anatomy", "a", "Anatomy", "Anatomy of the followed job (kfcockpit explain)",
           "What the platform put in the followed job's pods and who put each piece there: the torch "
           "plugin's PET_* variables, JobSet's DNS names, the patch's volume, the scheduler's node; the "
           "runtime's patches as a diff. Step 2 asks you to tell these from PyTorch's part.", footer=False),
    Action("show_logs", "l", "Logs", "Show logs",
           "Show the merged logs of the followed job; on the pods tab, only the selected pod's."),
    Action("go_to_rank", "g", "Rank", "Go to a rank",
           "Of a job with more ranks than the pods panel shows: type a rank; it keeps a row in the "
           "pods panel and its logs are read.", footer=False),
    Action("filter_logs", "slash", "Filter", "Filter logs", "Type text to keep only matching log lines.",
           key_display="/", footer_from=100),
    Action("snapshot", "s", "Snap", "Snapshot the volume",
           "Take a snapshot of the volume shown in the checkpoints tab.", footer=False),
    Action("compare", "c", "Compare", "Compare two snapshots",
           "Compare two snapshots side by side (the two marked with space, else the newest two).",
           footer=False),
    Action("toggle_follow", "f", "Follow", "Follow or pause the logs",
           "Pause the logs where they are, or jump to the end and follow new lines.", footer=False),
    Action("pick_job", "j", "Job", "Follow another job", "Choose which job's pods and logs to show.",
           footer=False),
    Action("refresh", "r", "Refresh", "Refresh checkpoints and snapshots",
           "Read the volume's checkpoints, the snapshots and the step states again.", footer=False),
    Action("show_tab('step')", "1", "Step", "Show the step card",
           "The step card, under the checklist, gets the keys; on a small terminal it fills the screen.",
           footer=False, group=TAB_GROUP),
    Action("show_tab('pods')", "2", "Pods", "Show the pods tab", "The followed job's pods, live.",
           footer=False, group=TAB_GROUP),
    Action("show_tab('logs')", "3", "Logs", "Show the logs tab", "The followed job's logs.",
           footer=False, group=TAB_GROUP),
    Action("show_tab('checkpoints')", "4", "Ckpts", "Show the checkpoints tab",
           "Checkpoints on the volume and its snapshots.", footer=False, group=TAB_GROUP),
    Action("show_tab('loss')", "5", "Loss", "Show the loss tab", "Loss curves, one per run.",
           footer=False, group=TAB_GROUP),
    Action("show_tab('timeline')", "6", "Time", "Show the failure timeline",
           "Each restart from failure to the first step trained again, timed.", footer=False,
           group=TAB_GROUP),
    Action("record", "ctrl+r", "Record", "Record the followed job, or stop recording",
           "Record what the cockpit shows of the followed job into the state root's recordings/ until it "
           "ends (ctrl+r again stops); kfcockpit replay FILE plays it back.", footer=False, key_display="^r"),
    Action("replay_pause", "P", "Pause", "Pause or play the replay",
           "On a replay (kfcockpit replay FILE): stop the recording's time where it is, or go on.", footer=False),
    Action("replay_faster('1')", "greater_than_sign", "Faster", "Replay faster",
           "On a replay: the next speed up (up to 16x).", footer=False, key_display=">"),
    Action("replay_faster('-1')", "less_than_sign", "Slower", "Replay slower",
           "On a replay: the next speed down (down to 0.25x).", footer=False, key_display="<"),
    Action("replay_seek('10')", "right_square_bracket", "Fwd", "Replay: 10 s forward",
           "On a replay: jump 10 seconds of the recording forward.", footer=False, key_display="]"),
    Action("replay_seek('-10')", "left_square_bracket", "Back", "Replay: 10 s back",
           "On a replay: jump 10 seconds back (the panels play again from there).", footer=False,
           key_display="["),
    Action("toggle_nodes", "N", "Nodes", "Show or hide the nodes view",
           "The cluster's nodes: Ready, cordoned, GPUs, CPU and memory requested of what each offers, pods; "
           "N again goes back."),
    Action("fail_node", "x", "Fail", "Fail the selected node",
           "In the nodes view, on the embedded cluster: the node's machine is lost (asks first); its pods' "
           "processes end, it goes NotReady, its pods are evicted and the job restarts on the nodes left.",
           view="nodes"),
    Action("restore_node", "u", "Restore", "Restore the selected node",
           "In the nodes view, on the embedded cluster: the failed node's machine is back (asks first); it "
           "registers Ready again and its taints go.", view="nodes"),
    Action("cordon_node", "C", "Cordon", "Cordon or uncordon the selected node",
           "In the nodes view: keep new pods off the node, or let them on again (asks first), as kubectl "
           "cordon and uncordon do.", view="nodes"),
    Action("zoom", "z", "Zoom", "Zoom the focused panel",
           "The focused panel fills the screen; z again puts it back.", footer_from=100),
    Action("toggle_checklist", "h", "Steps", "Hide or show the checklist",
           "Hide the lesson checklist for more room (n and p still move through the steps).",
           footer=False),
    Action("toggle_theme", "t", "Theme", "Switch light/dark theme",
           "Switch between the light and the dark theme (the choice is remembered).", footer=False),
    Action("help", "question_mark,f1", "Help", "Help", "Show the keys and what each panel shows.",
           key_display="?"),
    Action("quit", "q", "Quit", "Quit", "Leave the cockpit; jobs keep running (like a real cluster)."),
)


def bindings() -> list[Binding]:
    return [
        Binding(a.key, a.action, a.label, show=a.footer, priority=a.priority,
                key_display=a.key_display, group=a.group, tooltip=a.help)
        for a in ACTIONS
    ]


EVERYWHERE = ("help", "quit")  # in the footer whatever view is shown


def hidden_from_footer(width: int, view: str | None = None) -> set[str]:
    """The actions the footer leaves out at this terminal width, with `view` shown (or none)."""
    hidden = {a.action for a in ACTIONS if a.footer_from > width}
    if view is not None:
        hidden |= {a.action for a in ACTIONS if a.view != view and a.action not in EVERYWHERE
                   and a.action != f"toggle_{view}"}
    return hidden


PALETTE_CELLS = 12  # the command palette's key, docked at the footer's right: "▏^p palette "
ORDER = {a.action: i for i, a in enumerate(ACTIONS)}


def footer_overflow(shown: Iterable[Binding], width: int, display: Callable[[Binding], str]) -> set[str]:
    """The actions of `shown` (the footer's bindings, in its order) that leave the footer so its
    keys fit whole beside the palette's, by the one fitting rule (tui/model/fitting.py): the cockpit's
    actions in ACTIONS' order of importance, help and quit last to go, a focused widget's own keys
    (the note's save) before the cockpit's; a group's keys (n p step) go together."""
    fields: list[tuple[str, list[Binding]]] = []  # (the group's or action's name, its bindings)
    for binding in shown:
        name = binding.group.description if binding.group is not None else binding.action
        if fields and fields[-1][0] == name and binding.group is not None:
            fields[-1][1].append(binding)
        elif not any(binding.action == other.action for _, group in fields for other in group):
            fields.append((name, [binding]))

    def cells(field: tuple[str, list[Binding]]) -> int:
        keys = field[1]
        if len(keys) > 1:  # a group: a gap, its keys each with a gap, its label, a gap
            return 1 + sum(cell_len(display(b)) + 1 for b in keys) + cell_len(field[0]) + 1
        return cell_len(display(keys[0])) + 1 + cell_len(keys[0].description) + 1

    def priority(field: tuple[str, list[Binding]]) -> float:
        action = field[1][0].action
        if action in EVERYWHERE:
            return 3000
        return 1000 - ORDER[action] if action in ORDER else 2000

    kept = fit_fields(fields, width - PALETTE_CELLS + 1, cells, priority)  # the last gap may touch it
    return {b.action for field in fields if field not in kept for b in field[1]}


def view_of(action: str) -> str | None:
    """The view an action's key belongs to (None: it works everywhere)."""
    return next((a.view for a in ACTIONS if a.action == action), None)


def key_names(action: Action) -> str:
    """How the help screen spells a key: '?', '^k', '⏎ enter'."""
    shown = {"question_mark": "?", "slash": "/", "enter": "enter", "ctrl+k": "ctrl+k", "f1": "F1",
             "greater_than_sign": ">", "less_than_sign": "<", "right_square_bracket": "]",
             "left_square_bracket": "["}
    return " / ".join(shown.get(k, k) for k in action.key.split(","))
