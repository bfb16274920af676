// ESLint flat config: rules that catch bugs, not style (prettier owns layout).
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", ".test-results/", ".runner-test-home/", ".scratch/", "examples/*/repo/", "tests/fixtures/"] },
  { linterOptions: { reportUnusedDisableDirectives: "error" } },
  js.configs.recommended,
  {
    rules: {
      // The terminal sanitiser and the egress proxy match control characters on purpose.
      "no-control-regex": "off",
      // A `let` assigned once after a closure that reads it (a ref filled in later) is not a const.
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ["**/*.ts"],
    extends: [tseslint.configs.recommended],
    languageOptions: {
      parserOptions: { project: ["./tsconfig.check.json"], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A promise nobody awaits loses its rejection (an unhandled rejection ends the process) and its ordering.
      "@typescript-eslint/no-floating-promises": "error",
      // An async callback where a plain one is expected (an event listener, forEach) drops its rejection.
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { arguments: false, attributes: false } }],
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none", ignoreRestSiblings: true }],
      "@typescript-eslint/no-explicit-any": "warn",
    },
  },
  {
    // The MCP SDK stays in the two rooms that speak MCP (STYLE.md "Boundaries"): src/mcp/ (the client side,
    // the agent's MCP servers) and src/mcp-server/ (`runner mcp`); the CLI only wires them up.
    files: ["src/**/*.ts"],
    ignores: ["src/mcp/**", "src/mcp-server/**", "src/cli/mcp-command.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { group: ["@modelcontextprotocol/sdk", "@modelcontextprotocol/sdk/*"], message: "the MCP SDK is used only under src/mcp/ and src/mcp-server/" },
          ],
        },
      ],
    },
  },
  {
    // Only tests/unit/lint.test.ts lints these (with ignore: false), against their own small program.
    files: ["tests/fixtures/lint/**/*.ts"],
    languageOptions: { parserOptions: { project: ["./tests/fixtures/lint/tsconfig.json"] } },
  },
  {
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs", globals: globals.node },
  },
  {
    files: ["**/*.mjs", "**/*.js"],
    languageOptions: { sourceType: "module", globals: globals.node },
  },
  {
    // The page's ES modules (runner serve) run in the browser.
    files: ["src/server/assets/**/*.js"],
    languageOptions: { sourceType: "module", globals: globals.browser },
  },
  {
    files: ["**/*.cjs", "**/*.mjs", "**/*.js"],
    rules: { "no-unused-vars": ["error", { argsIgnorePattern: "^_", caughtErrors: "none" }] },
  },
);
