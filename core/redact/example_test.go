package redact_test

import (
	"errors"
	"fmt"
	"os"

	"khook.io/core/redact"
)

func Example() {
	red := redact.New()
	red.Add("hunter2")

	fmt.Println(red.String("password=hunter2 repo=https://bob:pw@charts.example.com/stable"))
	fmt.Println(red.String("basic auth: aHVudGVyMg=="))
	fmt.Println(red.Error(errors.New(`login failed for "hunter2"`)))

	w := red.Writer(os.Stdout)
	fmt.Fprint(w, "log: hun")
	fmt.Fprint(w, "ter2 done\n")
	w.Flush()
	// Output:
	// password=*** repo=https://***@charts.example.com/stable
	// basic auth: ***
	// login failed for "***"
	// log: *** done
}
