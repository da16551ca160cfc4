package cli

import (
	"flag"
	"io"
	"log"
	"os"
	"strconv"
	"sync"

	"k8s.io/klog/v2"
)

// clientLogs routes client-go's logs for one run (see Config.Logs): once,
// before the run's first clients are built, through the run's redacting
// standard error at the log level of -v (or the connection's debug
// switch); undone when the run ends.
type clientLogs struct {
	router     func(errOut io.Writer, verbosity int) (restore func())
	errOut     io.Writer
	connection Connection
	verbosity  int

	once    sync.Once
	restore func()
}

// route routes the logs, the first time it is called.
func (l *clientLogs) route() {
	l.once.Do(func() {
		if l.router == nil {
			return
		}
		v := l.verbosity
		if d, ok := l.connection.(Debugger); ok && v == 0 && d.Debug() {
			v = debugVerbosity
		}
		l.restore = l.router(l.errOut, v)
	})
}

// done undoes the routing, if any.
func (l *clientLogs) done() {
	l.once.Do(func() {}) // no routing from now on
	if l.restore != nil {
		l.restore()
	}
}

// RouteProcessLogs sends the process's loggers through errOut (khook's
// redacting standard error), never raw to the process's stderr: klog,
// which client-go logs through, at log level verbosity and without its
// headers, and the standard log package (kustomize's deprecation
// warnings), without timestamps. Both are global to the process: an
// entrypoint passes this function as Config.Logs, and the returned
// restore puts back what they were.
func RouteProcessLogs(errOut io.Writer, verbosity int) (restore func()) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	saved := map[string]string{}
	for _, kv := range [][2]string{{"logtostderr", "false"}, {"alsologtostderr", "false"}, {"stderrthreshold", "FATAL"}, {"skip_headers", "true"}, {"v", strconv.Itoa(verbosity)}} {
		saved[kv[0]] = fs.Lookup(kv[0]).Value.String()
		_ = fs.Set(kv[0], kv[1])
	}
	klog.SetOutput(errOut)
	logFlags, logOut := log.Flags(), log.Writer()
	log.SetFlags(0)
	log.SetOutput(errOut)
	return func() {
		klog.Flush()
		klog.SetOutput(os.Stderr)
		for name, value := range saved {
			_ = fs.Set(name, value)
		}
		log.SetFlags(logFlags)
		log.SetOutput(logOut)
	}
}
