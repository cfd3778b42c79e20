package output

// Units are netperf's -f letters: B K M G (bytes, 2^10, 2^20, 2^30 per
// second), b k m g (bits, 10^0, 10^3, 10^6, 10^9 per second), x
// (transactions per second, RR tests only) and u (microseconds per
// transaction).
const UnitLetters = "BKMGbkmgxu"

// ValidUnits reports whether c is a -f letter this netperf knows. (The C
// netperf takes any letter and prints KBytes for the ones it does not
// know; this one refuses them.)
func ValidUnits(c byte) bool {
	for i := 0; i < len(UnitLetters); i++ {
		if UnitLetters[i] == c {
			return true
		}
	}
	return false
}

// UnitsTitle is netperf's format_units(): the name of a -f unit.
func UnitsTitle(u byte) string {
	switch u {
	case 'B':
		return "Bytes"
	case 'K':
		return "KBytes"
	case 'M':
		return "MBytes"
	case 'G':
		return "GBytes"
	case 'b':
		return "10^0bits"
	case 'k':
		return "10^3bits"
	case 'm':
		return "10^6bits"
	case 'g':
		return "10^9bits"
	case 'x':
		return "Trans"
	case 'u':
		return "Usec"
	}
	return "KBytes"
}

// Rate is netperf's calc_thruput_interval: units (bytes, or transactions
// for 'x' and 'u') moved in secs, expressed in unit u per second.
func Rate(units, secs float64, u byte) float64 {
	if secs <= 0 {
		return 0
	}
	var div float64
	switch u {
	case 'K':
		div = 1024
	case 'M':
		div = 1024 * 1024
	case 'G':
		div = 1024 * 1024 * 1024
	case 'k':
		div = 1000.0 / 8
	case 'm':
		div = 1000.0 * 1000 / 8
	case 'g':
		div = 1000.0 * 1000 * 1000 / 8
	case 'x', 'b', 'B':
		div = 1
	case 'u':
		if units == 0 {
			return 0
		}
		return 1 / (units / secs) * 1e6
	default:
		div = 1024
	}
	return units / secs / div
}
