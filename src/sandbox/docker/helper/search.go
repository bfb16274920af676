package main

// `agent-runner-sandboxd grep` and `agent-runner-sandboxd glob`: the grep and
// glob tools in an image without ripgrep. The tools run the same pipeline
// with `rg` when the image has it; here the helper gives the pipeline's output
// itself, as rg 13 with the tools' flags would (docs/sandbox-helper.md):
//
//	grep: rg --with-filename --line-number --no-heading --color=never --hidden
//	      --glob '!.git' --max-columns=500 --max-columns-preview [--glob G]
//	      -e PATTERN -- PATH | head -n MAX | sed 's|^\./||'
//	glob: cd DIR && rg --files --hidden --glob '!.git' --glob PATTERN -0 .
//	      | xargs -0 stat --format '%Y %n' | sort -rn -k1,1 | cut -d' ' -f2- | sed 's|^\./||'
//
// Both walk the tree as rg does: hidden files included, symbolic links not
// followed, `.git` skipped, `.ignore` and `.rgignore` respected, `.gitignore`
// respected inside a git repository (a `.git` in the directory or above),
// the ignore files of the directories above the search root too; a `--glob`
// match overrides the ignore files, as rg's overrides do. It runs as the
// process that starts it (the sandbox user, started by a command), with no
// privilege of the helper's. Go's regexp (RE2) reads the Rust regex syntax
// ripgrep uses the same way for everything but look-around and backreferences,
// which neither supports.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxColumns and longLineMarker are rg's --max-columns=500 --max-columns-preview.
const (
	maxColumns     = 500
	longLineMarker = " [... omitted end of long line]"
)

// searchMain runs `grep` or `glob` with its arguments from the environment
// (as the tools pass them, so nothing the model sends is parsed by a shell)
// and returns the exit code: 0, or 2 for bad input (rg's code for errors).
func searchMain(command string) int {
	out := bufio.NewWriterSize(os.Stdout, 64*1024)
	defer out.Flush()
	var err error
	switch command {
	case "grep":
		maxRows, _ := strconv.Atoi(os.Getenv("RUNNER_GREP_MAX_ROWS"))
		err = grepFiles(out, os.Getenv("RUNNER_GREP_PATTERN"), os.Getenv("RUNNER_GREP_PATH"), os.Getenv("RUNNER_GREP_GLOB"), maxRows)
	case "glob":
		err = globFiles(out, os.Getenv("RUNNER_GLOB_DIR"), os.Getenv("RUNNER_GLOB_PATTERN"))
	}
	if err != nil {
		out.Flush()
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

func grepFiles(out *bufio.Writer, pattern, target, glob string, maxRows int) error {
	expression, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("regex parse error: %v", err)
	}
	// One pass over a whole file rules most files out; `^` and `$` then mean a line's ends, as on a line.
	anyLine := regexp.MustCompile("(?m:" + pattern + ")")
	if target == "" {
		target = "."
	}
	overrides := []string{"!.git"}
	if glob != "" {
		overrides = append(overrides, glob)
	}
	walker, err := newWalker(".", overrides)
	if err != nil {
		return err
	}
	rows := 0
	full := func() bool { return maxRows > 0 && rows >= maxRows }
	searchFile := func(path string, explicit bool) error {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			return nil
		}
		if !anyLine.Match(data) {
			return nil
		}
		if zero := bytes.IndexByte(data, 0); zero >= 0 {
			// rg skips a binary file it finds by walking; one it was given says it matches.
			if explicit && matchesLine(expression, data) {
				fmt.Fprintf(out, "%s: binary file matches (found \"\\0\" byte around offset %d)\n", path, zero)
				rows++
			}
			return nil
		}
		display := strings.TrimPrefix(path, "./")
		number := 0
		for len(data) > 0 && !full() {
			number++
			end := bytes.IndexByte(data, '\n')
			var line []byte
			if end < 0 {
				line, data = data, nil
			} else {
				line, data = data[:end], data[end+1:]
			}
			if !expression.Match(line) {
				continue
			}
			// rg measures the line with its terminator.
			if terminated := end >= 0; len(line) > maxColumns || (terminated && len(line) == maxColumns) {
				line = append(previewOf(line), longLineMarker...)
			}
			fmt.Fprintf(out, "%s:%d:%s\n", display, number, line)
			rows++
		}
		return nil
	}
	info, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("%s: %v", target, err)
	}
	if !info.IsDir() {
		return searchFile(target, true)
	}
	return walker.walk(target, func(path string) bool {
		if err := searchFile(path, false); err != nil {
			return false
		}
		return !full()
	})
}

// previewOf: the first maxColumns characters of a line longer than maxColumns
// bytes (rg measures the line in bytes and cuts its preview in characters).
func previewOf(line []byte) []byte {
	end := 0
	for count := 0; count < maxColumns && end < len(line); count++ {
		_, size := utf8.DecodeRune(line[end:])
		end += size
	}
	return line[:end:end]
}

// matchesLine: a match that does not span a line end (rg never matches one).
func matchesLine(expression *regexp.Regexp, data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if expression.Match(line) {
			return true
		}
	}
	return false
}

func globFiles(out *bufio.Writer, directory, pattern string) error {
	if directory != "" {
		if err := os.Chdir(directory); err != nil {
			return fmt.Errorf("%s: %v", directory, err)
		}
	}
	walker, err := newWalker(".", []string{"!.git", pattern})
	if err != nil {
		return err
	}
	type found struct {
		seconds int64
		path    string
	}
	var files []found
	_ = walker.walk(".", func(path string) bool {
		if info, err := os.Stat(path); err == nil {
			files = append(files, found{info.ModTime().Unix(), path})
		}
		return true
	})
	// sort -rn -k1,1 and, for equal times, its last resort: the whole line, reversed.
	sort.Slice(files, func(i, j int) bool {
		if files[i].seconds != files[j].seconds {
			return files[i].seconds > files[j].seconds
		}
		return files[i].path > files[j].path
	})
	for _, file := range files {
		fmt.Fprintln(out, strings.TrimPrefix(file.path, "./"))
	}
	return nil
}

// ignoreRule is one line of an ignore file or one --glob, as a regexp over
// the slash-separated path relative to its base directory.
type ignoreRule struct {
	expression *regexp.Regexp
	negated    bool
	directory  bool
}

type ignoreFile struct {
	base  string // absolute directory the rules are relative to
	rules []ignoreRule
}

type walker struct {
	root      string // absolute directory --glob paths are relative to
	overrides []ignoreRule
	positive  bool // some override includes: a file matching none is skipped
	inGit     bool
}

func newWalker(root string, globs []string) (*walker, error) {
	absolute, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	w := &walker{root: absolute}
	for _, glob := range globs {
		rule, ok := compileGitignoreLine(glob)
		if !ok {
			continue
		}
		if rule.expression == nil {
			return nil, fmt.Errorf("error parsing glob '%s'", glob)
		}
		w.overrides = append(w.overrides, rule)
		if !rule.negated {
			w.positive = true
		}
	}
	return w, nil
}

// walk calls visit with each file under `start` that is not ignored, in
// name order, until visit returns false.
func (w *walker) walk(start string, visit func(path string) bool) error {
	absolute, err := filepath.Abs(start)
	if err != nil {
		return err
	}
	// Ignore files of the directories above the start count too, as in rg.
	var ancestors []string
	for directory := filepath.Dir(absolute); ; directory = filepath.Dir(directory) {
		ancestors = append([]string{directory}, ancestors...)
		if directory == "/" || directory == "." {
			break
		}
	}
	for _, directory := range append(ancestors, absolute) {
		if _, err := os.Lstat(filepath.Join(directory, ".git")); err == nil {
			w.inGit = true
		}
	}
	var stack []ignoreFile
	for _, directory := range ancestors {
		stack = append(stack, w.readIgnoreFiles(directory)...)
	}
	w.walkDirectory(start, absolute, stack, visit)
	return nil
}

func (w *walker) walkDirectory(path, absolute string, stack []ignoreFile, visit func(path string) bool) bool {
	stack = append(stack[:len(stack):len(stack)], w.readIgnoreFiles(absolute)...)
	entries, err := os.ReadDir(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		return true
	}
	for _, entry := range entries {
		mode := entry.Type()
		if mode&os.ModeSymlink != 0 || !(mode.IsDir() || mode.IsRegular()) {
			continue
		}
		childPath := path + "/" + entry.Name()
		if path == "." {
			childPath = "./" + entry.Name()
		}
		childAbsolute := filepath.Join(absolute, entry.Name())
		if w.ignored(childAbsolute, mode.IsDir(), stack) {
			continue
		}
		if mode.IsDir() {
			if !w.walkDirectory(childPath, childAbsolute, stack, visit) {
				return false
			}
		} else if !visit(childPath) {
			return false
		}
	}
	return true
}

func (w *walker) readIgnoreFiles(directory string) []ignoreFile {
	names := []string{".ignore", ".rgignore"}
	if w.inGit {
		names = []string{".gitignore", ".ignore", ".rgignore"}
	}
	var files []ignoreFile
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(directory, name))
		if err != nil {
			continue
		}
		file := ignoreFile{base: directory}
		for _, line := range strings.Split(string(data), "\n") {
			if rule, ok := compileGitignoreLine(strings.TrimSuffix(line, "\r")); ok && rule.expression != nil {
				file.rules = append(file.rules, rule)
			}
		}
		files = append(files, file)
	}
	return files
}

// ignored decides as rg does: the overrides (--glob) first, then the ignore
// files from the deepest directory up, the last matching line of a file winning.
func (w *walker) ignored(absolute string, isDirectory bool, stack []ignoreFile) bool {
	if relative, ok := relativeTo(w.root, absolute); ok && len(w.overrides) > 0 {
		// An override's glob includes and its `!glob` excludes: the other way round from an ignore file.
		if decided, excluded := decide(w.overrides, relative, isDirectory); decided {
			return !excluded
		}
		if w.positive && !isDirectory {
			return true
		}
	}
	for index := len(stack) - 1; index >= 0; index-- {
		relative, ok := relativeTo(stack[index].base, absolute)
		if !ok {
			continue
		}
		if decided, ignore := decide(stack[index].rules, relative, isDirectory); decided {
			return ignore
		}
	}
	return false
}

func decide(rules []ignoreRule, relative string, isDirectory bool) (decided, ignore bool) {
	for index := len(rules) - 1; index >= 0; index-- {
		rule := rules[index]
		if rule.directory && !isDirectory {
			continue
		}
		if rule.expression.MatchString(relative) {
			return true, !rule.negated
		}
	}
	return false, false
}

func relativeTo(base, absolute string) (string, bool) {
	if base == "/" {
		return strings.TrimPrefix(absolute, "/"), true
	}
	if !strings.HasPrefix(absolute, base+"/") {
		return "", false
	}
	return absolute[len(base)+1:], true
}

// compileGitignoreLine reads one gitignore line (gitignore(5)): ok is false
// for a blank line or a comment; expression is nil when the glob is invalid.
func compileGitignoreLine(line string) (ignoreRule, bool) {
	// Trailing spaces are dropped unless escaped.
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
		line = line[:len(line)-1]
	}
	if line == "" || strings.HasPrefix(line, "#") {
		return ignoreRule{}, false
	}
	rule := ignoreRule{}
	if strings.HasPrefix(line, "!") {
		rule.negated = true
		line = line[1:]
	} else if strings.HasPrefix(line, "\\!") || strings.HasPrefix(line, "\\#") {
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") && !strings.HasSuffix(line, "\\/") {
		rule.directory = true
		line = strings.TrimRight(line, "/")
	}
	if line == "" {
		return ignoreRule{}, false
	}
	anchored := strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	body, ok := globToRegexp(line)
	if !ok {
		return rule, true
	}
	prefix := "^"
	if !anchored && !strings.HasPrefix(line, "**/") {
		prefix = "^(?:.*/)?"
	}
	expression, err := regexp.Compile("(?s)" + prefix + body + "$")
	if err == nil {
		rule.expression = expression
	}
	return rule, true
}

// globToRegexp translates a gitignore glob: `*` and `?` stop at `/`, `**`
// between slashes (or at either end) crosses them, `[...]` is a class.
func globToRegexp(glob string) (string, bool) {
	var out strings.Builder
	for index := 0; index < len(glob); index++ {
		character := glob[index]
		switch {
		case strings.HasPrefix(glob[index:], "**") && (index == 0 || glob[index-1] == '/') && (index+2 == len(glob) || glob[index+2] == '/'):
			if index+2 == len(glob) {
				out.WriteString(".*")
				index++
			} else {
				out.WriteString("(?:.*/)?")
				index += 2
			}
		case character == '*':
			out.WriteString("[^/]*")
		case character == '?':
			out.WriteString("[^/]")
		case character == '\\':
			if index+1 < len(glob) {
				index++
				out.WriteString(regexp.QuoteMeta(glob[index : index+1]))
			}
		case character == '[':
			end := index + 1
			if end < len(glob) && (glob[end] == '!' || glob[end] == '^') {
				end++
			}
			if end < len(glob) && glob[end] == ']' {
				end++
			}
			for end < len(glob) && glob[end] != ']' {
				end++
			}
			if end >= len(glob) {
				return "", false
			}
			class := glob[index+1 : end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			out.WriteString("[" + strings.ReplaceAll(class, "\\", "\\\\") + "]")
			index = end
		default:
			out.WriteString(regexp.QuoteMeta(glob[index : index+1]))
		}
	}
	return out.String(), true
}
