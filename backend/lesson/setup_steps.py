"""Setup 2 and 3: the controller, the Pipelines SDK and its runner (setup 1 is a reading step)."""

from __future__ import annotations

import asyncio
import json
import sys

from backend.lesson.context import Handler, StepContext, line, needs_cluster
from backend.lesson.reading import platform_record
from backend.models import Check, Evidence


# ---------------------------------------------------------------- setup 2: the controller


def _controller_check(checks: list[Check]) -> Check | None:
    for word in ("controller", "trainer"):
        for check in checks:
            if word in check.name.lower():
                return check
    return None


async def verify_controller(ctx: StepContext) -> Evidence:
    checks = await ctx.require_cluster().preflight()
    check = _controller_check(checks)
    details = [f"{'ok ' if c.ok else 'NOT'} {c.name}: {c.detail}" for c in checks]
    if check is None:
        return ctx.evidence(False, "the platform's preflight reports no controller check", details)
    seen = f"{check.name}: {check.detail}" + ("" if check.ok or not check.fix else f" — fix: {check.fix}")
    return ctx.evidence(check.ok, seen, details)


async def run_preflight(ctx: StepContext):
    yield line(f"platform: {platform_record(ctx)}")
    cluster = ctx.require_cluster()
    # Any request reaches the control plane; the embedded cluster starts its controller on demand.
    jobs = await cluster.list_jobs()
    yield line(f"the platform answers: {len(jobs)} TrainJob(s)")
    for check in await cluster.preflight():
        yield line(f"{'ok ' if check.ok else 'NOT'} {check.name}: {check.detail}")


# ---------------------------------------------------------------- setup 3: the SDK and its runner

# Run in a fresh interpreter: it is the learner's question ("does the SDK import?"), and it keeps
# kfp out of the cockpit's own process.
_PROBE = """
import json, sys
out = {}
try:
    import kfp
    out["kfp"] = kfp.__version__
    from kfp import local
    local.init(runner=local.SubprocessRunner(use_venv=False))
    out["runner"] = "kfp.local.SubprocessRunner"
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


async def probe_sdk() -> dict:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _PROBE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (err.decode().strip().splitlines() or ["the probe printed nothing"])[-1]}


def _pipelines_check(checks: list[Check]) -> Check | None:
    for check in checks:
        if "pipeline" in check.name.lower() or "kfp" in check.name.lower():
            return check
    return None


async def verify_sdk(ctx: StepContext) -> Evidence:
    probe = await probe_sdk()
    if "kfp" not in probe:
        return ctx.evidence(False, f"the Pipelines SDK does not import: {probe.get('error')}",
                            ["fix: pip install kfp (the project pins kfp==2.17.3)"])
    sdk = f"kfp {probe['kfp']} imports"
    if not ctx.capabilities.pipelines_here:
        check = _pipelines_check(await ctx.require_cluster().preflight())
        if check is None:
            return ctx.evidence(False, f"{sdk}; the platform's preflight has no Pipelines endpoint check")
        return ctx.evidence(check.ok, f"{sdk}; {check.name}: {check.detail}",
                            [f"fix: {check.fix}"] if check.fix and not check.ok else [])
    if "runner" not in probe:
        return ctx.evidence(False, f"{sdk} but the local runner does not start: {probe.get('error')}")
    return ctx.evidence(True, f"{sdk}; the local pipeline runner ({probe['runner']}) is ready",
                        ["on the embedded cluster pipelines run with kfp.local, which ignores "
                         "Kubernetes settings (mounts, resources, node selectors)"])


HANDLERS = {
    "setup-2": Handler(verify=verify_controller, run=run_preflight, unavailable=needs_cluster),
    # On the embedded cluster the runner is kfp.local in this machine's Python: no cluster needed.
    "setup-3": Handler(verify=verify_sdk,
                       unavailable=lambda ctx: None if ctx.capabilities.pipelines_here else needs_cluster(ctx)),
}
