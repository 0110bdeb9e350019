package docs

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// A Migration is one row of the table from an old flag to the
// Configuration field that replaces it (api/config/v1alpha1.Flags).
type Migration struct {
	Field, Note string
}

// Commands holds the flags each command of ours defines today, keyed by
// the words that name it in prose or in a command line: "manager",
// "api", "worker run", "worker shard", "people-import", "localstack".
type Commands map[string]map[string]bool

// commandWords are the words that say which program a --flag belongs to,
// matched on the same line as the flag; the nearest one wins. Other
// tools' words (kubectl, helm, ...) map to "" (not ours: not checked).
var commandWords = []struct {
	re      *regexp.Regexp
	command string
}{
	{regexp.MustCompile(`\bkubectl\b|\bhelm\b|\bcurl\b|\bgit\b|\bdocker\b|\bgo (?:test|run|build|tool)\b|\bjobbench\b|\bsmtpbench\b`), ""},
	{regexp.MustCompile(`\bmake run\b|\blocalstack\b|\blocal stack\b|\bARGS=`), "localstack"},
	{regexp.MustCompile(`\bworker run\b`), "worker run"},
	{regexp.MustCompile(`\bworker shard\b`), "worker shard"},
	{regexp.MustCompile(`\bpeople-import\b`), "people-import"},
	{regexp.MustCompile(`\bmanager\b`), "manager"},
	{regexp.MustCompile(`\bAPI's\b|\bbin/api\b|\bcmd/api\b`), "api"},
}

var flagMention = regexp.MustCompile("(?:^|[\\s`(\"'\\[,=])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")

// StaleFlags returns a problem for every --flag of text that the
// migration table lists as one of ours and that the program the line
// names does not define any more. A line naming another tool (kubectl,
// helm, curl, go test, ...) nearer the flag than any of ours is not ours
// and is skipped; a line naming none of ours is checked against every
// production binary (manager, API, worker), so that a flag only
// `worker run` keeps (--shard-by) must be said to be worker run's. The
// message names the field to write instead.
func StaleFlags(page, text string, table map[string]Migration, cmds Commands) []Problem {
	var problems []Problem
	inFence := false
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		n := i
		// A command continued with a backslash is one line.
		for inFence && strings.HasSuffix(strings.TrimSpace(line), `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(strings.TrimSpace(line), `\`) + " " + lines[i]
		}
		for _, m := range flagMention.FindAllStringSubmatchIndex(line, -1) {
			name := line[m[2]:m[3]]
			mig, ours := table[name]
			if !ours || strings.Contains(mig.Note, stays) && mig.Field == "" {
				continue
			}
			command, found := nearestCommand(line, m[2])
			if found && command == "" {
				continue // another tool's flag
			}
			if found && cmds[command][name] {
				continue
			}
			if !found && defined(cmds, name) {
				continue
			}
			where := "no binary of ours defines it any more"
			if found {
				where = "the " + command + " does not define it any more"
			} else if progs := definers(cmds, name); len(progs) > 0 {
				where = "only " + strings.Join(progs, ", ") + " defines it: say so on the line, or name the field"
			}
			instead := "write the field " + "`" + mig.Field + "`"
			if mig.Field == "" {
				instead = mig.Note
			} else if mig.Note != "" {
				instead += " (" + mig.Note + ")"
			}
			problems = append(problems, Problem{Page: page, Line: n + 1, Flag: name, Text: line,
				Message: fmt.Sprintf("%s:%d: --%s: %s; %s", page, n+1, name, where, instead)})
		}
	}
	return problems
}

// A Problem is one mention of a removed flag: where, the line (a command
// continued with backslashes joined), and the message naming the field.
type Problem struct {
	Page    string
	Line    int
	Flag    string
	Text    string
	Message string
}

func (p Problem) String() string { return p.Message }

// stays is the migration table's mark of a flag that remains one.
const stays = "stays a flag"

// nearestCommand returns the command whose word is nearest to position
// at on the line, before or after it.
func nearestCommand(line string, at int) (string, bool) {
	best, dist, found := "", len(line)+1, false
	for _, w := range commandWords {
		for _, loc := range w.re.FindAllStringIndex(line, -1) {
			if partOfName(line, loc) {
				continue
			}
			d := at - loc[1]
			if loc[0] >= at {
				d = loc[0] - at
			}
			if d < dist {
				best, dist, found = w.command, d, true
			}
		}
	}
	return best, found
}

// partOfName reports whether the word at loc is part of a longer name:
// a field path (manager.leaderElectionID), a resource's name
// (emaildata-manager), not the program.
func partOfName(line string, loc []int) bool {
	if loc[0] > 0 && strings.ContainsRune(".-", rune(line[loc[0]-1])) {
		return true
	}
	return loc[1]+1 < len(line) && strings.ContainsRune(".-", rune(line[loc[1]])) &&
		(line[loc[1]+1] >= 'a' && line[loc[1]+1] <= 'z' || line[loc[1]+1] >= 'A' && line[loc[1]+1] <= 'Z')
}

// defined reports whether a production binary (manager, api, worker
// shard) defines the flag; worker run's and the local stack's own flags
// need their name on the line.
func defined(cmds Commands, name string) bool {
	for _, c := range []string{"manager", "api", "worker shard"} {
		if cmds[c][name] {
			return true
		}
	}
	return false
}

func definers(cmds Commands, name string) []string {
	var progs []string
	for c, flags := range cmds {
		if flags[name] {
			progs = append(progs, c)
		}
	}
	sort.Strings(progs)
	return progs
}
