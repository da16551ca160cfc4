// Command khook-specgen writes a generated spec (see package specgen) to
// standard output, for the start-up benchmark in bench/startup.sh.
package main

import (
	"flag"
	"fmt"
	"os"

	"khook.io/core/testing/specgen"
)

func main() {
	steps := flag.Int("steps", 500, "number of steps")
	when := flag.Bool("when", false, "give every step its own when:")
	flag.Parse()
	if _, err := fmt.Print(specgen.Spec(*steps, *when)); err != nil {
		os.Exit(1)
	}
}
