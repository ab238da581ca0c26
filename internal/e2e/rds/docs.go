package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// docSection is the section of docs/controller.md whose commands the run
// executes as written, with the placeholders of docPlaceholders replaced.
const docSection = "## Connecting to RDS and Aurora"

// docBlocks returns the fenced code blocks of lang (sql, sh) in the
// section heading of the Markdown file path, in order.
func docBlocks(path, heading, lang string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []string
	var in, inBlock bool
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			in = line == heading
		case in && !inBlock && line == "```"+lang:
			inBlock = true
			b.Reset()
		case inBlock && line == "```":
			inBlock = false
			blocks = append(blocks, b.String())
		case inBlock:
			b.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%s: no ```%s block under %q", path, lang, heading)
	}
	return blocks, nil
}

// substitute replaces each placeholder of the documented commands with
// the run's value.
func substitute(text string, values map[string]string) string {
	for k, v := range values {
		text = strings.ReplaceAll(text, k, v)
	}
	return text
}
