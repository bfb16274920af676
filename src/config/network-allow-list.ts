// run-task.ts still imports the allow list from here; it moves to ../sandbox/network-allow-list.js with the run's phases split.
export { describeRule, parseAllowEntry, type AllowRule } from "../sandbox/network-allow-list.js";
