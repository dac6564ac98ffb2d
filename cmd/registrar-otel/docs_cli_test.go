package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The one exit-code table of the docs lists exactly the statuses the
// commands use, in both languages, and the command table names every
// command.
func TestDocsExitCodeTableAndCommandsMatchTheBinary(t *testing.T) {
	statuses := []int{exitOK, exitFailure, exitUsage, exitTransport, exitLimited, exitRetryable, exitInterrupt, exitTerminate}
	rowRE := regexp.MustCompile(`(?m)^\| (\d+) \|`)
	for _, lang := range []string{"en", "ko"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "docs", lang, "commands.md"))
		if err != nil {
			t.Fatal(err)
		}
		page := string(raw)
		start := strings.Index(page, "{#exit-codes}")
		end := strings.Index(page, "{#progress}")
		if start < 0 || end < start {
			t.Fatalf("docs/%s/commands.md has no exit-codes section before progress", lang)
		}
		var rows []string
		for _, m := range rowRE.FindAllStringSubmatch(page[start:end], -1) {
			rows = append(rows, m[1])
		}
		var want []string
		for _, s := range statuses {
			want = append(want, fmt.Sprint(s))
		}
		if strings.Join(rows, ",") != strings.Join(want, ",") {
			t.Errorf("docs/%s/commands.md exit codes %v, want %v", lang, rows, want)
		}
		for _, c := range commands {
			if !strings.Contains(page, "`"+c.name+"`") {
				t.Errorf("docs/%s/commands.md does not name the command %q", lang, c.name)
			}
		}
	}
}
