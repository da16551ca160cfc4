package cli

import (
	"flag"
	"io"
	"log"
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
// entrypoint passes this function as Config.Logs. restore, when the run
// ends, puts back the standard logger and klog's level, and drops klog's
// later lines (a background goroutine's, after the run) rather than write
// them raw to stderr: the next run routes them again, to its own writer.
func RouteProcessLogs(errOut io.Writer, verbosity int) (restore func()) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	level := fs.Lookup("v").Value.String()
	for _, kv := range [][2]string{{"logtostderr", "false"}, {"alsologtostderr", "false"}, {"stderrthreshold", "FATAL"}, {"skip_headers", "true"}, {"v", strconv.Itoa(verbosity)}} {
		_ = fs.Set(kv[0], kv[1])
	}
	klog.SetOutput(errOut)
	logFlags, logOut := log.Flags(), log.Writer()
	log.SetFlags(0)
	log.SetOutput(errOut)
	return func() {
		klog.Flush()
		klog.SetOutput(io.Discard)
		_ = fs.Set("v", level)
		log.SetFlags(logFlags)
		log.SetOutput(logOut)
	}
}
