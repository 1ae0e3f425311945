"""`bitcase verify`: relational kernel proofs for a sealed plan or for one user kernel."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from assurance.cli._common import EXIT_FINDINGS, BitcaseError, JsonOption, err_console, fail, out_console
from assurance.cli._signing import SignKeyOption, load_signing_key

PlanOption = Annotated[str | None, typer.Option(
    "--plan", metavar="PRESET", help="Sealed plan preset to verify, as `bitcase model make --preset` names them "
                                     "(default: D's plan, else tiny).")]
DeploymentOption = Annotated[Path | None, typer.Option(
    "--deployment", metavar="FILE", help="JSON file of the deployment configuration D ({\"fields\": {...}} or the fields "
                         "themselves); its kernel_plan entries are verified and the records name it.",
    dir_okay=False)]
OutOption = Annotated[Path | None, typer.Option("--out", metavar="FILE", help="Write the evidence bundle (JSONL) here.",
                                                dir_okay=False)]
KeyOption = Annotated[list[str] | None, typer.Option("--key", metavar="KEY", help="Only this plan entry key (repeatable).")]
ContractOption = Annotated[Path | None, typer.Option(
    "--contract", metavar="FILE", help="Contract TOML for FILE.py::KERNEL (required with a target).", dir_okay=False)]
ConstexprOption = Annotated[list[str] | None, typer.Option(
    "--constexpr", metavar="NAME=VALUE", help="NAME=VALUE for a constexpr of FILE.py::KERNEL (repeatable; ints, floats, true/false, "
                        "or strings such as ieee or bfloat16).")]
DetailsOption = Annotated[bool, typer.Option("--details", help="Print the full report of every result.")]
JobsOption = Annotated[int | None, typer.Option(
    "--jobs", min=1, metavar="N", help="Worker processes for a plan's entries (default: $BITCASE_VERIFY_JOBS, else "
                                       "the CPUs, at most 4).")]


def _constexprs(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.isidentifier():
            raise BitcaseError(f"--constexpr {item!r} is not NAME=VALUE", hint="e.g. --constexpr BLOCK_M=64")
        low = text.lower()
        if low in ("true", "false"):
            out[name] = low == "true"
            continue
        for kind in (int, float):
            try:
                out[name] = kind(text)
                break
            except ValueError:
                continue
        else:
            out[name] = text
    return out


def _read_deployment(path: Path):
    from evidence_db.bundle import Deployment

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BitcaseError(f"cannot read deployment file {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise BitcaseError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise BitcaseError(f"{path}: expected a JSON object of D's fields")
    fields = data.get("fields", data) if "fields" in data else data
    try:
        return Deployment(fields=fields, digest=data.get("digest", "") if "fields" in data else "")
    except ValueError as exc:
        raise BitcaseError(f"{path}: {exc}", hint="drop the digest to have it recomputed") from None


def _plan_targets(plan_name: str | None, deployment, keys: list[str] | None):
    from kernels.plan import preset_plan
    from proofs.planrun import targets_from_deployment, targets_from_plan
    from proofs.producer import minimal_deployment

    targets = targets_from_deployment(deployment.fields) if deployment is not None else None
    if targets is None:
        named = ((deployment.fields.get("kernel_plan") or {}).get("name") if deployment is not None else None)
        name = plan_name or named or "tiny"
        if named and plan_name and named != plan_name:
            raise BitcaseError(f"--plan {plan_name} but the deployment names plan {named}")
        try:
            plan = preset_plan(name)
        except ValueError as exc:
            raise BitcaseError(str(exc), hint="use a preset that `bitcase model make --help` lists") from None
        targets = targets_from_plan(plan)
        if deployment is None:
            deployment = minimal_deployment(plan.name, plan.digest)
    if keys:
        unknown = sorted(set(keys) - {t.key for t in targets})
        if unknown:
            raise BitcaseError(f"no plan entry {', '.join(unknown)}",
                               hint="known keys: " + ", ".join(t.key for t in targets))
        targets = [t for t in targets if t.key in set(keys)]
    return targets, deployment


def _user_target(target: str, contract_path: Path | None, constexprs: dict[str, Any], deployment):
    from evidence_db.bundle import Deployment
    from evidence_db.canonical import digest_of
    from proofs import VERIFIER_VERSION
    from proofs.contract import load_contract
    from proofs.producer import package_version
    from proofs.source import load_kernel, split_target

    if contract_path is None:
        raise BitcaseError(f"{target} needs --contract CONTRACT.toml", hint="docs/verifier.md describes the format")
    path, name = split_target(target)
    src = load_kernel(path, name)
    contract = load_contract(contract_path)
    if contract.kernel != name:
        raise BitcaseError(f"contract {contract_path} describes {contract.kernel}, not {name}")
    key = f"{name.lower()}.c{digest_of(constexprs)[7:19]}"
    if deployment is None:
        deployment = Deployment(fields={"kernel": {"file": str(path), "digest": src.digest, "key": key},
                                        "software": {"triton": package_version("triton")},
                                        "verifier": {"version": VERIFIER_VERSION}})
    return src, contract, key, deployment


def _progress_bar():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err_console, transient=True)


def _summary_table(results) -> None:
    from rich.table import Table

    from proofs.report import verdict_line

    table = Table(title="Kernel proofs (relational invariance, not numerical correctness)")
    for col in ("entry", "verdict", "obligations", "seconds", "detail"):
        table.add_column(col, overflow="fold")
    colours = {"VERIFIED": "green", "REFUTED": "red", "UNKNOWN": "yellow", "UNSUPPORTED": "yellow"}
    for r in results:
        detail = "" if r.verdict == "VERIFIED" else verdict_line(r).split(": ", 1)[-1]
        detail = detail if len(detail) <= 90 else detail[:89] + "…"
        table.add_row(r.key, f"[{colours[r.verdict]}]{r.verdict}[/]", f"{r.proved}/{len(r.obligations)}",
                      f"{r.seconds:.2f}", detail)
    out_console.print(table)


def verify(
    target: Annotated[str | None, typer.Argument(metavar="FILE.py::KERNEL", help="FILE.py::KERNEL to verify instead of the plan.")] = None,
    plan: PlanOption = None,
    deployment_file: DeploymentOption = None,
    out: OutOption = None,
    key: KeyOption = None,
    contract: ContractOption = None,
    constexpr: ConstexprOption = None,
    details: DetailsOption = False,
    jobs: JobsOption = None,
    sign_key: SignKeyOption = None,
    json_out: JsonOption = False,
) -> None:
    """Prove selected-region invariance of every sealed-plan kernel (or of FILE.py::KERNEL) with Z3.

    VERIFIED: bitwise-equal selected outputs for related inputs, under the listed premises and trusted
    assumptions; never numerical correctness. Exit 0 when all are VERIFIED, 1 when any is REFUTED,
    UNKNOWN or UNSUPPORTED, 2 on bad input.
    """
    try:
        signer = load_signing_key(sign_key) if out is not None else None  # before the work: a bad key fails fast
        results = _verify(target, plan, deployment_file, out, key, contract, constexpr, signer, jobs)
    except BitcaseError as exc:
        fail(str(exc), hint=exc.hint)
    if json_out:
        json.dump([r.to_dict() for r in results], sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        from proofs.report import render_text

        _summary_table(results)
        for r in results:
            if details or r.verdict != "VERIFIED":
                out_console.print(render_text(r), markup=False, highlight=False)
    if any(r.verdict != "VERIFIED" for r in results):
        raise typer.Exit(code=EXIT_FINDINGS)


def _verify(target, plan, deployment_file, out, key, contract, constexpr, signer=None, jobs=None):
    """Run the verification the options ask for; write the bundle; return the results."""
    from evidence_db.bundle import utc_now, write_bundle
    from proofs.errors import ContractError, KernelSourceError
    from proofs.producer import producer_info, records_for

    started = utc_now()
    command = "bitcase verify " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["verify"] else "bitcase verify"
    deployment = _read_deployment(deployment_file) if deployment_file is not None else None
    try:
        if target is not None:
            from proofs.driver import verify_kernel
            from proofs.wrapper import checked_premises

            values = _constexprs(constexpr or [])
            src, kcontract, ukey, deployment = _user_target(target, contract, values, deployment)
            with err_console.status(f"verifying {target}"):
                results = [verify_kernel(src, kcontract, values, key=ukey,
                                         checked_premises=checked_premises(src, kcontract, values))]
        else:
            if contract is not None or constexpr:
                raise BitcaseError("--contract and --constexpr need a FILE.py::KERNEL target")
            from proofs.planrun import default_jobs, verify_targets

            if jobs is None:
                try:
                    jobs = default_jobs()
                except ValueError as exc:
                    raise BitcaseError(str(exc), hint="unset it, or pass --jobs N") from None
            targets, deployment = _plan_targets(plan, deployment, key)
            with _progress_bar() as bar:
                task = bar.add_task("verifying", total=len(targets))
                results = verify_targets(targets, jobs=jobs, progress=lambda msg, done, total: bar.update(
                    task, completed=done, description=msg))
    except (ContractError, KernelSourceError) as exc:
        raise BitcaseError(str(exc), hint="fix the contract or kernel named above (docs/verifier.md)") from None
    if out is not None:
        count = write_bundle(out, records_for(results, deployment, producer_info(command, started)), signer=signer)
        signed = f", signed by {signer.key_id}" if signer is not None else ""
        err_console.print(f"wrote {count} evidence records to {out} (D {deployment.digest[:19]}…){signed}",
                          highlight=False)
    return results


def register(app: typer.Typer) -> None:
    """Add ``bitcase verify`` to the main app."""
    app.command("verify")(verify)
