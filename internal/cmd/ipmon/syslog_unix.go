//go:build unix

package ipmon

import (
	"fmt"
	"log/syslog"
)

var facilities = map[string]syslog.Priority{
	"kern": syslog.LOG_KERN, "user": syslog.LOG_USER, "mail": syslog.LOG_MAIL,
	"daemon": syslog.LOG_DAEMON, "auth": syslog.LOG_AUTH, "syslog": syslog.LOG_SYSLOG,
	"lpr": syslog.LOG_LPR, "news": syslog.LOG_NEWS, "uucp": syslog.LOG_UUCP,
	"cron": syslog.LOG_CRON, "authpriv": syslog.LOG_AUTHPRIV, "ftp": syslog.LOG_FTP,
	"local0": syslog.LOG_LOCAL0, "local1": syslog.LOG_LOCAL1, "local2": syslog.LOG_LOCAL2,
	"local3": syslog.LOG_LOCAL3, "local4": syslog.LOG_LOCAL4, "local5": syslog.LOG_LOCAL5,
	"local6": syslog.LOG_LOCAL6, "local7": syslog.LOG_LOCAL7,
}

type unixSyslog struct{ w *syslog.Writer }

func openSyslog(facility string) (sysLogger, error) {
	fac, ok := facilities[facility]
	if !ok {
		return nil, fmt.Errorf("unknown facility %q", facility)
	}
	w, err := syslog.New(fac|syslog.LOG_NOTICE, "ipmon")
	if err != nil {
		return nil, err
	}
	return unixSyslog{w}, nil
}

func (s unixSyslog) Close() error { return s.w.Close() }

// Log writes msg at the syslog level ipmon chose for the record.
func (s unixSyslog) Log(lvl int, msg string) error {
	switch lvl {
	case 0:
		return s.w.Emerg(msg)
	case 1:
		return s.w.Alert(msg)
	case 2:
		return s.w.Crit(msg)
	case 3:
		return s.w.Err(msg)
	case 4:
		return s.w.Warning(msg)
	case 5:
		return s.w.Notice(msg)
	case 6:
		return s.w.Info(msg)
	}
	return s.w.Debug(msg)
}
