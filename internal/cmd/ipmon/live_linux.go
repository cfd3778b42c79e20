package ipmon

import "sluice/internal/ipfctl"

func openLive() (recordSource, error) { return ipfctl.OpenLiveLog(ipfctl.PinDir()) }
