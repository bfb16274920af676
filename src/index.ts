/**
 * agent-runner as a library (package entry, docs/library.md "Library"): the Runner
 * and its handles, and the types a caller needs to read what they return.
 */
export type { AgencyHandle, AgencyOptions, AgencyRunner, AgencyRunnerOptions, OutsideEvent } from "./agency/agency.js";
export { createRunner } from "./worker/agency-runner.js";
export type { AgencyReport, AgencyStatus } from "./agency/agency-directory.js";
export { STOP_CLASSES, type ChainStop, type StopClass } from "./agency/guards/stop-reasons.js";
export { AgencyFileError, type AgencyProblem } from "./agency/load-agency.js";
export type { InvocationExecutor, InvocationRequest, InvocationRun } from "./agency/invocation-executor.js";
export type { AgencyEvent } from "./bus/event-bus.js";
export {
  Runner,
  type ApprovalAgency,
  type ApprovalBroker,
  type ApprovalRequest,
  type ModelText,
  type RunHandle,
  type RunnerOptions,
  type StartOptions,
} from "./runner/runner.js";
export {
  cloudEventType,
  EVENT_CATALOGUE,
  readEvent,
  type EventRead,
  type ReadEventOptions,
  type RunEnvelope,
  type RunEvent,
  type RunEventData,
  type RunEventName,
} from "./events/event-catalogue.js";
export type { RunReport, RunStatus } from "./run/run-report.js";
export type { ApprovalAnswer } from "./policy/approval.js";
export { ConfigError, SandboxError, CancelledError, RunnerError } from "./errors.js";
export { listRuns, readRunRecord, type RunRecord, type RunSummary } from "./runner/run-records.js";
export { RUN_FILES } from "./run/run-store.js";
export { HostDirectorySandboxProvider, type HostDirectorySandboxOptions } from "./sandbox/fake/host-directory-sandbox.js";
export type { SandboxProvider, Sandbox, SandboxSpec } from "./sandbox/sandbox.js";
