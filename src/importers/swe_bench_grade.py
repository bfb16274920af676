"""SWE-bench grading inside the verification sandbox (agent-runner, docs/importers.md).

Usage: python3 -I swe_bench_grade.py DIR, where DIR holds test.patch and spec.json
({instance_id, parser, test_command, directives, fail_to_pass, pass_to_pass}).
Applies the test patch, runs exactly the test command over the test files, parses
its output as the official harness does, and exits 0 iff every FAIL_TO_PASS and
PASS_TO_PASS test passed (1 otherwise, 2 for a bad spec).

The rules follow SWE-bench's harness (swebench/harness/log_parsers/python.py and
grading.py, github.com/SWE-bench/SWE-bench), re-implemented here: a test passes
with PASSED or XFAIL; a PASS_TO_PASS test is also kept by SKIPPED; a test absent
from the output failed; a non-zero exit of the test command while the output
shows no FAILED or ERROR line means the output does not describe the run
(a patch printing its own PASSED lines), and nothing passes.
"""

import json
import shutil
import os
import re
import shlex
import subprocess
import sys

STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")
SKIP_SUMMARY_COUNT = re.compile(r"^\[\d+\]$")
ESCAPES = str.maketrans("", "", "".join(chr(code) for code in range(1, 32)))


def is_skip_summary(status, name):
    # pytest's "SKIPPED [2] path:line: reason" summary names no test.
    return status == "SKIPPED" and bool(SKIP_SUMMARY_COUNT.match(name))


def parse_pytest(log, rewrite=lambda line: line):
    results = {}
    for line in log.split("\n"):
        line = rewrite(line)
        if line.startswith(STATUSES):
            if line.startswith("FAILED"):
                line = line.replace(" - ", " ")
            fields = line.split()
            if len(fields) <= 1 or is_skip_summary(fields[0], fields[1]):
                continue
            results[fields[1]] = fields[0]
    return results


def parse_pytest_options(log):
    option = re.compile(r"(.*?)\[(.*)\]")
    results = {}
    for name, status in parse_pytest(log).items():
        match = option.search(name)
        if match:
            main, value = match.groups()
            # Temporary paths in parameters differ per run: keep their last component.
            if value.startswith("/") and not value.startswith("//") and "*" not in value:
                value = "/" + value.split("/")[-1]
            name = f"{main}[{value}]"
        results[name] = status
    return results


def parse_pytest_v2(log):
    results = {}
    for line in log.split("\n"):
        line = re.sub(r"\[(\d+)m", "", line).translate(ESCAPES)
        if line.startswith(STATUSES):
            if line.startswith("FAILED"):
                line = line.split(" - ", 1)[0]
            fields = line.split()
            if len(fields) >= 2 and not is_skip_summary(fields[0], fields[1]):
                results[" ".join(fields[1:])] = fields[0]
        elif line.endswith(STATUSES):
            fields = line.split()
            if len(fields) >= 2:
                results[" ".join(fields[:-1])] = fields[-1]
    return results


def parse_matplotlib(log):
    return parse_pytest(log, lambda line: line.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3"))


def parse_seaborn(log):
    results = {}
    for line in log.split("\n"):
        fields = line.split()
        if len(fields) < 2:
            continue
        if line.startswith("FAILED"):
            results[fields[1]] = "FAILED"
        elif " PASSED " in line:
            if fields[1] == "PASSED":
                results[fields[0]] = "PASSED"
        elif line.startswith("PASSED"):
            results[fields[1]] = "PASSED"
    return results


def parse_django(log):
    results = {}
    previous = None
    for line in log.split("\n"):
        line = line.strip()
        if "--version is equivalent to version" in line:
            results["--version is equivalent to version"] = "PASSED"
        if " ... " in line:
            previous = line.split(" ... ")[0]
        for suffix in (" ... ok", " ... OK", " ...  OK"):
            if line.endswith(suffix):
                # django__django-7188 prints a migration line in front of its test name.
                if line.strip().startswith("Applying sites.0002_alter_domain_unique...test_no_migrations"):
                    line = line.split("...", 1)[-1].strip()
                results[line.rsplit(suffix, 1)[0]] = "PASSED"
                break
        if " ... skipped" in line:
            results[line.split(" ... skipped")[0]] = "SKIPPED"
        if line.endswith(" ... FAIL"):
            results[line.split(" ... FAIL")[0]] = "FAILED"
        if line.startswith("FAIL:"):
            results[line.split()[1].strip()] = "FAILED"
        if line.endswith(" ... ERROR"):
            results[line.split(" ... ERROR")[0]] = "ERROR"
        if line.startswith("ERROR:"):
            results[line.split()[1].strip()] = "ERROR"
        # Output between " ... " and its "ok" puts the verdict on a line of its own.
        if line.lstrip().startswith("ok") and previous is not None:
            results[previous] = "PASSED"
    # Long log lines that interrupt a test's line before its "ok".
    for pattern in (
        r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
        r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$",
        r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
    ):
        for match in re.finditer(pattern, log, re.MULTILINE):
            results[match.group(1)] = "PASSED"
    return results


def parse_sympy(log):
    results = {}
    for match in re.findall(r"(_*) (.*)\.py:(.*) (_*)", log):
        results[f"{match[1]}.py:{match[2]}"] = "FAILED"
    for line in log.split("\n"):
        line = line.strip()
        if line.startswith("test_"):
            if line.endswith(" E"):
                results[line.split()[0]] = "ERROR"
            if line.endswith(" F"):
                results[line.split()[0]] = "FAILED"
            if line.endswith(" ok"):
                results[line.split()[0]] = "PASSED"
    return results


PARSERS = {
    "pytest": parse_pytest,
    "pytest_options": parse_pytest_options,
    "pytest_v2": parse_pytest_v2,
    "matplotlib": parse_matplotlib,
    "seaborn": parse_seaborn,
    "sympy": parse_sympy,
    "django": parse_django,
}


def resolve_case(case, results):
    if case in results:
        return case
    # Ids cut inside a parameter (SWE-bench issue #290): a prefix match when the candidates agree.
    if case.count("[") > case.count("]"):
        matches = [name for name in results if name.startswith(case)]
        if matches and len({results[name] in ("PASSED", "XFAIL") for name in matches}) == 1:
            return matches[0]
    return None


def grade(results, exit_code, fail_to_pass, pass_to_pass):
    """{'resolved', 'fail_to_pass': {'success', 'failure'}, 'pass_to_pass': {...}, 'note'}."""
    note = None
    if exit_code not in (None, 0) and results and not any(status in ("FAILED", "ERROR") for status in results.values()):
        note = f"the test command exited {exit_code} while its output shows no FAILED or ERROR line: the output does not describe the run"
        results = {}
    if not results and note is None:
        note = "no test result in the output (the tests did not run)"

    def status_of(case):
        key = resolve_case(case, results)
        return None if key is None else results[key]

    report = {"fail_to_pass": {"success": [], "failure": []}, "pass_to_pass": {"success": [], "failure": []}}
    for case in fail_to_pass:
        passed = status_of(case) in ("PASSED", "XFAIL")
        report["fail_to_pass"]["success" if passed else "failure"].append(case)
    for case in pass_to_pass:
        kept = status_of(case) in ("PASSED", "XFAIL", "SKIPPED")
        report["pass_to_pass"]["success" if kept else "failure"].append(case)
    report["resolved"] = bool(results) and not report["fail_to_pass"]["failure"] and not report["pass_to_pass"]["failure"]
    report["note"] = note
    return report


NAMES_LISTED = 20


def summary_lines(instance_id, exit_code, report):
    """The grader's last words: the tests that did not pass (the first 20 of each list), then the
    summary, last, so that a record keeping only the end of the output keeps the verdict and the
    counts, and the test output above the names is not pushed out by a long list of them."""
    lines = []
    for group in ("fail_to_pass", "pass_to_pass"):
        failure = report[group]["failure"]
        lines += [f"[swe-bench] {group.upper()} not passed: {case}" for case in failure[:NAMES_LISTED]]
        if len(failure) > NAMES_LISTED:
            lines.append(f"[swe-bench] {group.upper()} not passed: {len(failure) - NAMES_LISTED} more")
    lines.append(f"[swe-bench] {instance_id}: test command exited {exit_code}")
    for group in ("fail_to_pass", "pass_to_pass"):
        success, failure = report[group]["success"], report[group]["failure"]
        lines.append(f"[swe-bench] {group.upper()}: {len(success)}/{len(success) + len(failure)} passed")
    if report["note"]:
        lines.append(f"[swe-bench] note: {report['note']}")
    lines.append(f"[swe-bench] {'resolved' if report['resolved'] else 'not resolved'}")
    return lines


def apply_test_patch(directory):
    patch = os.path.join(directory, "test.patch")
    for command in (["git", "apply", "-v", patch], ["patch", "--batch", "--fuzz=5", "-p1", "-i", patch]):
        try:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except FileNotFoundError:
            continue
        print(done.stdout, end="")
        if done.returncode == 0:
            return True
    return False


def main(directory):
    with open(os.path.join(directory, "spec.json"), encoding="utf-8") as file:
        spec = json.load(file)
    parser = PARSERS.get(spec["parser"])
    if parser is None:
        print(f"[swe-bench] unknown parser {spec['parser']!r}")
        return 2
    if not apply_test_patch(directory):
        print("[swe-bench] the test patch did not apply: not resolved")
        return 1
    command = " ".join([spec["test_command"], *(shlex.quote(path) for path in spec["directives"])])
    print(f"[swe-bench] {command}", flush=True)
    # The output is read from the pipe, not from a file the tests could write.
    process = subprocess.Popen([shutil.which("bash") or "sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    chunks = []
    for chunk in iter(lambda: process.stdout.read1(65536), b""):
        chunks.append(chunk)
        sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
    exit_code = process.wait()
    log = b"".join(chunks).decode("utf-8", "replace")
    report = grade(parser(log), exit_code, spec["fail_to_pass"], spec["pass_to_pass"])
    print("\n" + "\n".join(summary_lines(spec["instance_id"], exit_code, report)))
    return 0 if report["resolved"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
