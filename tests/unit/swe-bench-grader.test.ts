/**
 * The SWE-bench grader (src/importers/swe_bench_grade.py) on harness output
 * shaped like the real thing: pytest's `-rA` short summary, astropy's verbose
 * classic output (the harness's pytest_v2 parser), sympy's bin/test, and a
 * run whose exit code contradicts its PASSED lines. The grader is Python (it
 * runs inside the verification sandbox); here the host's python3 runs it on
 * these logs.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const GRADER_DIRECTORY = fileURLToPath(new URL("../../src/importers/", import.meta.url));

function python(code: string, input: unknown): unknown {
  const program = `import json, sys\nsys.path.insert(0, ${JSON.stringify(GRADER_DIRECTORY)})\nimport swe_bench_grade as g\ndata = json.load(sys.stdin)\n${code}`;
  return JSON.parse(execFileSync("python3", ["-I", "-B", "-c", program], { input: JSON.stringify(input), encoding: "utf8" }));
}

const parse = (parser: string, log: string) => python(`print(json.dumps(g.PARSERS[${JSON.stringify(parser)}](data)))`, log) as Record<string, string>;
const grade = (results: Record<string, string>, exitCode: number, f2p: string[], p2p: string[]) =>
  python("print(json.dumps(g.grade(data['r'], data['e'], data['f'], data['p'])))", { r: results, e: exitCode, f: f2p, p: p2p }) as {
    resolved: boolean;
    fail_to_pass: { success: string[]; failure: string[] };
    pass_to_pass: { success: string[]; failure: string[] };
    note: string | null;
  };

const PYTEST_RA = `============================= test session starts ==============================
collected 5 items

tests/test_calc.py ..F.s                                                  [100%]

=========================== short test summary info ============================
PASSED tests/test_calc.py::test_add
PASSED tests/test_calc.py::test_sub
PASSED tests/test_calc.py::test_mul[2-3-6]
SKIPPED [1] tests/test_calc.py:30: needs numpy
FAILED tests/test_calc.py::test_div - ZeroDivisionError: division by zero
ERROR tests/test_calc.py::test_fixture - fixture 'db' not found
XFAIL tests/test_calc.py::test_known_bug - reason: issue 12
==================== 1 failed, 3 passed, 1 skipped, 1 xfailed in 0.05s =========
`;

const ASTROPY_VERBOSE = `astropy/io/fits/tests/test_header.py::TestHeaderFunctions::test_rename_keyword PASSED [ 10%]
astropy/io/fits/tests/test_header.py::TestHeaderFunctions::test_card_from_bytes FAILED [ 20%]
=========================== short test summary info ============================
PASSED astropy/io/fits/tests/test_header.py::TestHeaderFunctions::test_shallow_copy
FAILED astropy/io/fits/tests/test_header.py::TestHeaderFunctions::test_card_from_bytes - AssertionError: x
`;

const SYMPY_BIN_TEST = `============================= test process starts ==============================
executable:         /opt/miniconda3/envs/testbed/bin/python  (3.9.19-final-0) [CPython]
architecture:       64-bit
random seed:        40245923
hash randomization: on (PYTHONHASHSEED=1413433218)

sympy/matrices/tests/test_commonmatrix.py[3]
test__MinimalMatrix ok
test_vec ok
test_hstack E
sympy/matrices/tests/test_matrices.py[2]
test_col_insert F
test_issue_17652 ok

________________________________________________________________________________
_______ sympy/matrices/tests/test_commonmatrix.py:test_hstack ________
Traceback (most recent call last):
  File "/testbed/sympy/matrices/tests/test_commonmatrix.py", line 221, in test_hstack
NameError: name 'x' is not defined
========== tests finished: 3 passed, 1 failed, 1 exceptions, in 1.21 seconds ===
`;

const DJANGO_RUNTESTS = `Testing against Django installed in '/testbed/django' with up to 1 processes
Importing application queries
Creating test database for alias 'default'...
System check identified no issues (1 silenced).
test_ticket_24605 (queries.tests.Ticket24605Tests) ... ok
test_in_list_limit (queries.tests.ConditionalTests) ... skipped 'Database has feature(s) supports_select_union'
test_or_with_rhs_slice (queries.tests.QuerySetBitwiseOperationTests) ... FAIL
test_distinct_ordered (queries.tests.Queries1Tests) ... ERROR
test_noisy (queries.tests.NoisyTests) ... Internal Server Error: /
ok

======================================================================
FAIL: test_or_with_rhs_slice (queries.tests.QuerySetBitwiseOperationTests)
----------------------------------------------------------------------
Traceback (most recent call last):
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 5 tests in 0.101s

FAILED (failures=1, errors=1, skipped=1)
`;

describe("SWE-bench grader: parsers as the official harness reads test output", () => {
  it("django's runtests.py --verbosity 2: `name (module.Class) ... ok|FAIL|ERROR|skipped`, and an `ok` on a line of its own", () => {
    expect(parse("django", DJANGO_RUNTESTS)).toEqual({
      "test_ticket_24605 (queries.tests.Ticket24605Tests)": "PASSED",
      "test_in_list_limit (queries.tests.ConditionalTests)": "SKIPPED",
      "test_or_with_rhs_slice (queries.tests.QuerySetBitwiseOperationTests)": "FAILED",
      "test_distinct_ordered (queries.tests.Queries1Tests)": "ERROR",
      "test_noisy (queries.tests.NoisyTests)": "PASSED",
      // The harness reads the `FAIL: name (...)` header's first word too.
      test_or_with_rhs_slice: "FAILED",
    });
  });

  it("pytest -rA: the short summary's status and test id; FAILED/ERROR messages cut; pytest's SKIPPED [n] summary names no test", () => {
    expect(parse("pytest", PYTEST_RA)).toEqual({
      "tests/test_calc.py::test_add": "PASSED",
      "tests/test_calc.py::test_sub": "PASSED",
      "tests/test_calc.py::test_mul[2-3-6]": "PASSED",
      "tests/test_calc.py::test_div": "FAILED",
      "tests/test_calc.py::test_fixture": "ERROR",
      "tests/test_calc.py::test_known_bug": "XFAIL",
    });
  });

  it("pytest_v2 (astropy, scikit-learn, sphinx): also the verbose `<id> PASSED [ n%]` lines", () => {
    const results = parse("pytest_v2", ASTROPY_VERBOSE);
    expect(results["astropy/io/fits/tests/test_header.py::TestHeaderFunctions::test_shallow_copy"]).toBe("PASSED");
    expect(results["astropy/io/fits/tests/test_header.py::TestHeaderFunctions::test_card_from_bytes"]).toBe("FAILED");
  });

  it("pytest_options (requests, pylint, pydicom): a temporary path in a parameter keeps only its last component", () => {
    expect(parse("pytest_options", "PASSED tests/test_x.py::test_path[/tmp/pytest-of-u/pytest-3/data.txt]\n")).toEqual({
      "tests/test_x.py::test_path[/data.txt]": "PASSED",
    });
  });

  it("sympy's bin/test: `name ok`, ` F`, ` E`, and the traceback banners of failed tests", () => {
    expect(parse("sympy", SYMPY_BIN_TEST)).toEqual({
      test__MinimalMatrix: "PASSED",
      test_vec: "PASSED",
      test_hstack: "ERROR",
      test_col_insert: "FAILED",
      test_issue_17652: "PASSED",
      "sympy/matrices/tests/test_commonmatrix.py:test_hstack": "FAILED",
    });
  });
});

describe("SWE-bench grader: resolved iff every FAIL_TO_PASS and PASS_TO_PASS test passed", () => {
  const results = parse("pytest", PYTEST_RA);

  it("resolved when all listed tests passed (XFAIL counts as passed; a skipped PASS_TO_PASS test is kept)", () => {
    const report = grade(results, 1, ["tests/test_calc.py::test_add", "tests/test_calc.py::test_known_bug"], ["tests/test_calc.py::test_sub"]);
    expect(report.resolved).toBe(true);
    expect(
      grade({ ...results, "tests/test_calc.py::test_sub": "SKIPPED" }, 1, ["tests/test_calc.py::test_add"], ["tests/test_calc.py::test_sub"]).resolved,
    ).toBe(true);
  });

  it("not resolved: a FAIL_TO_PASS test that failed, errored, was skipped, or is absent from the output", () => {
    expect(grade(results, 1, ["tests/test_calc.py::test_div"], []).resolved).toBe(false);
    expect(grade(results, 1, ["tests/test_calc.py::test_fixture"], []).resolved).toBe(false);
    expect(grade({ "t.py::a": "SKIPPED" }, 0, ["t.py::a"], []).resolved).toBe(false);
    const absent = grade(results, 1, ["tests/test_calc.py::test_add", "tests/test_calc.py::test_never_ran"], []);
    expect(absent.resolved).toBe(false);
    expect(absent.fail_to_pass.failure).toEqual(["tests/test_calc.py::test_never_ran"]);
  });

  it("not resolved: a PASS_TO_PASS test that broke", () => {
    expect(grade(results, 1, ["tests/test_calc.py::test_add"], ["tests/test_calc.py::test_div"]).resolved).toBe(false);
  });

  it("a parametrized id cut inside its parameter matches by prefix when the candidates agree (harness issue #290)", () => {
    expect(grade({ "t.py::test_grammar[log(photon)]": "PASSED" }, 0, ["t.py::test_grammar[log(photon"], []).resolved).toBe(true);
  });

  it("forged output: the test command exited non-zero yet no FAILED or ERROR line shows, so nothing passed", () => {
    const report = grade({ "tests/test_calc.py::test_add": "PASSED" }, 1, ["tests/test_calc.py::test_add"], []);
    expect(report.resolved).toBe(false);
    expect(report.note).toMatch(/does not describe the run/);
  });

  it("no result at all is not resolved, even with empty lists", () => {
    expect(grade({}, 0, [], []).resolved).toBe(false);
  });
});

describe("SWE-bench grader: the summary comes last", () => {
  it("the names of tests that did not pass (the first 20 of a list) come before the counts and the verdict", () => {
    const failure = Array.from({ length: 25 }, (_, index) => `t.py::test_${index}`);
    const lines = python("print(json.dumps(g.summary_lines(data['id'], 1, data['report'])))", {
      id: "acme__calc-1",
      report: {
        resolved: false,
        note: "no test result in the output (the tests did not run)",
        fail_to_pass: { success: [], failure },
        pass_to_pass: { success: ["t.py::kept"], failure: [] },
      },
    }) as string[];
    expect(lines.slice(0, 20)).toEqual(failure.slice(0, 20).map((name) => `[swe-bench] FAIL_TO_PASS not passed: ${name}`));
    expect(lines.slice(20)).toEqual([
      "[swe-bench] FAIL_TO_PASS not passed: 5 more",
      "[swe-bench] acme__calc-1: test command exited 1",
      "[swe-bench] FAIL_TO_PASS: 0/25 passed",
      "[swe-bench] PASS_TO_PASS: 1/1 passed",
      "[swe-bench] note: no test result in the output (the tests did not run)",
      "[swe-bench] not resolved",
    ]);
  });
});
