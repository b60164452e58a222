"""`kfcockpit k9s install-plugin`: the cockpit as a k9s plugin (manifests/k9s/plugins.yaml), merged
into the user's k9s plugins file.

The user's file is theirs: their plugins and, wherever it can be done, their comments and layout
stay as they were. The cockpit's entries are appended as text and the result kept only if it reads
back as exactly their plugins plus ours; otherwise (ours changed since the last install, a layout
that appending cannot extend) the file is written again from its data. A file that is not a k9s
plugins file is left alone, with one line saying why.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tui.cli.common import EXIT_USAGE, add_command, fail

K9S_DESCRIPTION = """\
Shift-K on a TrainJob, a JobSet or a RayJob in k9s then opens the cockpit following it, in k9s's
context and namespace (kfcockpit --follow NAME --namespace NAMESPACE --context CONTEXT). The file
is k9s's own: $K9S_CONFIG_DIR/plugins.yaml, else $XDG_CONFIG_HOME/k9s/plugins.yaml (~/.config on
Linux, ~/Library/Application Support on macOS). Your other plugins are kept; running it again
changes nothing."""


class PluginsFileError(ValueError):
    """The user's plugins file is not one this command may merge into (one line)."""


def register(sub: argparse._SubParsersAction) -> None:
    k9s = add_command(sub, "k9s", help="open the cockpit from k9s")
    actions = k9s.add_subparsers(title="actions", metavar="ACTION", dest="k9s_action", required=True)
    p = add_command(actions, "install-plugin", help="add the cockpit's plugin to your k9s plugins file",
                    description=K9S_DESCRIPTION)
    p.add_argument("--print", action="store_true", help="print the plugin file instead of installing it")
    p.set_defaults(handler=install_plugin)


def shipped_plugins() -> Path:
    from backend.project import MANIFESTS

    return MANIFESTS / "k9s" / "plugins.yaml"


def k9s_plugins_file(env: dict[str, str] | None = None) -> Path:
    """Where k9s reads its plugins, as k9s's internal/config/files.go decides: K9S_CONFIG_DIR
    when set (initK9sEnvLocs), else the XDG config home's k9s folder (initXDGLocs, through
    adrg/xdg: $XDG_CONFIG_HOME, else ~/.config, or ~/Library/Application Support on macOS)."""
    env = os.environ if env is None else env
    if env.get("K9S_CONFIG_DIR"):
        return Path(env["K9S_CONFIG_DIR"]) / "plugins.yaml"
    if env.get("XDG_CONFIG_HOME"):
        base = Path(env["XDG_CONFIG_HOME"])
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path.home() / ".config"
    return base / "k9s" / "plugins.yaml"


def _plugins_of(text: str, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the whole document, its `plugins` map) of a plugins file; PluginsFileError if it is none."""
    import yaml

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise PluginsFileError(f"{where} is not YAML{at}; fix or move it, then install again") from None
    document = {} if document is None else document
    if not isinstance(document, dict):
        raise PluginsFileError(f"{where} is not a k9s plugins file (not a mapping); left as it is")
    plugins = document.get("plugins")
    if plugins is not None and not isinstance(plugins, dict):
        raise PluginsFileError(f"{where}: 'plugins' is not a mapping of plugins; left as it is")
    return document, plugins or {}


def merged(existing: str, shipped: str, where: str) -> str | None:
    """The user's file with the shipped plugins in it, or None when it has them already."""
    import yaml

    document, theirs = _plugins_of(existing, where)
    _, ours = _plugins_of(shipped, "the shipped plugin file")
    if all(theirs.get(name) == plugin for name, plugin in ours.items()):
        return None
    wanted = {**document, "plugins": {**theirs, **ours}}
    if not existing.strip():
        return shipped
    if not any(name in theirs for name in ours):
        # Appended as text, at the indentation their plugins use: their comments and layout stay.
        base = existing if existing.endswith("\n") else existing + "\n"
        if "plugins" not in document:
            base += "plugins:\n"
        block = yaml.safe_dump(ours, sort_keys=False, default_flow_style=False)
        for indent in (2, 4, 3, 1, 5, 6, 7, 8):
            text = base + "".join(" " * indent + line for line in block.splitlines(keepends=True))
            try:
                if yaml.safe_load(text) == wanted:
                    return text
            except yaml.YAMLError:
                continue
    return yaml.safe_dump(wanted, sort_keys=False, default_flow_style=False)


def install_plugin(args: argparse.Namespace) -> int:
    from training.atomic import write_atomic

    shipped = shipped_plugins().read_text(encoding="utf-8")
    if args.print:
        sys.stdout.write(shipped)
        return 0
    target = k9s_plugins_file().resolve()  # a linked file (dotfiles) is written where it lives
    try:
        existing = target.read_text(encoding="utf-8") if target.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        return fail(f"cannot read {target}: {getattr(exc, 'strerror', None) or exc}", EXIT_USAGE, exit_now=False)
    try:
        text = merged(existing, shipped, str(target))
    except PluginsFileError as exc:
        return fail(str(exc), EXIT_USAGE, exit_now=False)
    if text is None:
        print(f"the kfcockpit k9s plugin is already in {target}")
        return 0
    try:
        write_atomic(target, text)
    except OSError as exc:
        return fail(f"cannot write {target}: {exc.strerror or exc}", EXIT_USAGE, exit_now=False)
    print(f"added the kfcockpit k9s plugin to {target}: Shift-K on a TrainJob, JobSet or RayJob opens it")
    return 0
