package proto

// Request is omni_request_struct (DO_OMNI, client to server).
type Request struct {
	CPUAffinity   int32 // word 1: remote CPU to bind to, -1 = none (-T ,n)
	SendBufSize   int32 // -S; -1 = OS default
	SendSize      int32 // remote send size (-M ... for MAERTS), -1 = default
	SendAlign     int32
	SendOffset    int32
	SendWidth     int32
	RequestSize   int32 // RR request size, -1 for streams
	RecvBufSize   int32
	RecvSize      int32
	RecvAlign     int32
	RecvOffset    int32
	RecvWidth     int32
	ResponseSize  int32
	Flags         uint32
	CPURate       float32
	TestLength    int32 // >0 seconds; <0 = -(transaction count)
	SoRcvAvoid    int32
	SoSndAvoid    int32
	SendDirty     int32
	RecvDirty     int32
	RecvClean     int32
	DataPort      int32 // 0 = ephemeral
	IPFamily      int32
	SocketType    int32 // 1 stream, 2 dgram
	Protocol      int32
	Direction     int32 // server's view (Dir*)
	NetperfPort   int32
	IntervalBurst int32
	IntervalUsecs int32
	NetperfIP     [4]uint32
	NetserverIP   [4]uint32
	SocketPrio    int32
	SocketTos     int32
	CongControl   string // char[16]
	FillFile      string // char[32]
}

// Request word offsets, as in the C struct.
const (
	reqSendBufSize = 0x08 + 4*iota
	reqSendSize
	reqSendAlign
	reqSendOffset
	reqSendWidth
	reqRequestSize
	reqRecvBufSize
	reqRecvSize
	reqRecvAlign
	reqRecvOffset
	reqRecvWidth
	reqResponseSize
	reqFlags
	reqCPURate
	reqTestLength
	reqSoRcvAvoid
	reqSoSndAvoid
	reqSendDirty
	reqRecvDirty
	reqRecvClean
	reqDataPort
	reqIPFamily
	reqSocketType
	reqProtocol
	reqDirection
	reqNetperfPort
	reqIntervalBurst
	reqIntervalUsecs
	reqNetperfIP
	reqNetserverIP = reqNetperfIP + 16
	reqSocketPrio  = reqNetserverIP + 16
	reqSocketTos   = reqSocketPrio + 4
	reqCongControl = reqSocketTos + 4 // 0xa0
	reqFillFile    = reqCongControl + 16
)

// Encode writes r into m as a DO_OMNI message; bytes past the fields are zero.
func (r *Request) Encode(m *Msg) {
	clear(m[:])
	m.SetHeader(TypeDoOmni, r.CPUAffinity)
	ints := [...]struct {
		off int
		v   int32
	}{
		{reqSendBufSize, r.SendBufSize}, {reqSendSize, r.SendSize},
		{reqSendAlign, r.SendAlign}, {reqSendOffset, r.SendOffset},
		{reqSendWidth, r.SendWidth}, {reqRequestSize, r.RequestSize},
		{reqRecvBufSize, r.RecvBufSize}, {reqRecvSize, r.RecvSize},
		{reqRecvAlign, r.RecvAlign}, {reqRecvOffset, r.RecvOffset},
		{reqRecvWidth, r.RecvWidth}, {reqResponseSize, r.ResponseSize},
		{reqTestLength, r.TestLength}, {reqSoRcvAvoid, r.SoRcvAvoid},
		{reqSoSndAvoid, r.SoSndAvoid}, {reqSendDirty, r.SendDirty},
		{reqRecvDirty, r.RecvDirty}, {reqRecvClean, r.RecvClean},
		{reqDataPort, r.DataPort}, {reqIPFamily, r.IPFamily},
		{reqSocketType, r.SocketType}, {reqProtocol, r.Protocol},
		{reqDirection, r.Direction}, {reqNetperfPort, r.NetperfPort},
		{reqIntervalBurst, r.IntervalBurst}, {reqIntervalUsecs, r.IntervalUsecs},
		{reqSocketPrio, r.SocketPrio}, {reqSocketTos, r.SocketTos},
	}
	for _, f := range ints {
		m.put(f.off, f.v)
	}
	m.putU(reqFlags, r.Flags)
	m.putF(reqCPURate, r.CPURate)
	for i := range 4 {
		m.putU(reqNetperfIP+4*i, r.NetperfIP[i])
		m.putU(reqNetserverIP+4*i, r.NetserverIP[i])
	}
	m.putStr(reqCongControl, 16, r.CongControl)
	m.putStr(reqFillFile, 32, r.FillFile)
}

// Decode fills r from m. Every bit pattern is accepted; range checks are the
// server's job because only it knows which fields the test uses.
func (r *Request) Decode(m *Msg) {
	r.CPUAffinity = m.i32(offWord1)
	r.SendBufSize = m.i32(reqSendBufSize)
	r.SendSize = m.i32(reqSendSize)
	r.SendAlign = m.i32(reqSendAlign)
	r.SendOffset = m.i32(reqSendOffset)
	r.SendWidth = m.i32(reqSendWidth)
	r.RequestSize = m.i32(reqRequestSize)
	r.RecvBufSize = m.i32(reqRecvBufSize)
	r.RecvSize = m.i32(reqRecvSize)
	r.RecvAlign = m.i32(reqRecvAlign)
	r.RecvOffset = m.i32(reqRecvOffset)
	r.RecvWidth = m.i32(reqRecvWidth)
	r.ResponseSize = m.i32(reqResponseSize)
	r.Flags = m.u32(reqFlags)
	r.CPURate = m.f32(reqCPURate)
	r.TestLength = m.i32(reqTestLength)
	r.SoRcvAvoid = m.i32(reqSoRcvAvoid)
	r.SoSndAvoid = m.i32(reqSoSndAvoid)
	r.SendDirty = m.i32(reqSendDirty)
	r.RecvDirty = m.i32(reqRecvDirty)
	r.RecvClean = m.i32(reqRecvClean)
	r.DataPort = m.i32(reqDataPort)
	r.IPFamily = m.i32(reqIPFamily)
	r.SocketType = m.i32(reqSocketType)
	r.Protocol = m.i32(reqProtocol)
	r.Direction = m.i32(reqDirection)
	r.NetperfPort = m.i32(reqNetperfPort)
	r.IntervalBurst = m.i32(reqIntervalBurst)
	r.IntervalUsecs = m.i32(reqIntervalUsecs)
	for i := range 4 {
		r.NetperfIP[i] = m.u32(reqNetperfIP + 4*i)
		r.NetserverIP[i] = m.u32(reqNetserverIP + 4*i)
	}
	r.SocketPrio = m.i32(reqSocketPrio)
	r.SocketTos = m.i32(reqSocketTos)
	r.CongControl = m.str(reqCongControl, 16)
	r.FillFile = m.str(reqFillFile, 32)
}

// Response is omni_response_struct (OMNI_RESPONSE, server to client).
type Response struct {
	Errno         int32 // serv_errno, 0 = OK
	RecvBufSize   int32
	RecvSize      int32
	RecvWidth     int32
	SendBufSize   int32
	SendSize      int32
	SendWidth     int32
	Flags         uint32
	CPURate       float32
	TestLength    int32
	SoRcvAvoid    int32
	SoSndAvoid    int32
	DataPort      int32
	IntervalBurst int32
	IntervalUsecs int32
	CPUFrequency  int32
	SecurityInfo  int32
	SocketPrio    int32
	SocketTos     int32
	SystemModel   string // char[33]
	CPUModel      string // char[80]
	Security      string // char[16]
}

const (
	rspRecvBufSize = 0x08 + 4*iota
	rspRecvSize
	rspRecvWidth
	rspSendBufSize
	rspSendSize
	rspSendWidth
	rspFlags
	rspCPURate
	rspTestLength
	rspSoRcvAvoid
	rspSoSndAvoid
	rspDataPort
	rspIntervalBurst
	rspIntervalUsecs
	rspCPUFrequency
	rspSecurityInfo
	rspSocketPrio
	rspSocketTos
	rspSystemModel // 0x50
	rspCPUModel    = rspSystemModel + 33
	rspSecurity    = rspCPUModel + 80
)

// Encode writes r into m as an OMNI_RESPONSE.
func (r *Response) Encode(m *Msg) {
	clear(m[:])
	m.SetHeader(TypeOmniResponse, r.Errno)
	m.put(rspRecvBufSize, r.RecvBufSize)
	m.put(rspRecvSize, r.RecvSize)
	m.put(rspRecvWidth, r.RecvWidth)
	m.put(rspSendBufSize, r.SendBufSize)
	m.put(rspSendSize, r.SendSize)
	m.put(rspSendWidth, r.SendWidth)
	m.putU(rspFlags, r.Flags)
	m.putF(rspCPURate, r.CPURate)
	m.put(rspTestLength, r.TestLength)
	m.put(rspSoRcvAvoid, r.SoRcvAvoid)
	m.put(rspSoSndAvoid, r.SoSndAvoid)
	m.put(rspDataPort, r.DataPort)
	m.put(rspIntervalBurst, r.IntervalBurst)
	m.put(rspIntervalUsecs, r.IntervalUsecs)
	m.put(rspCPUFrequency, r.CPUFrequency)
	m.put(rspSecurityInfo, r.SecurityInfo)
	m.put(rspSocketPrio, r.SocketPrio)
	m.put(rspSocketTos, r.SocketTos)
	m.putStr(rspSystemModel, 33, r.SystemModel)
	m.putStr(rspCPUModel, 80, r.CPUModel)
	m.putStr(rspSecurity, 16, r.Security)
}

// Decode fills r from m without looking at the message type (Q1).
func (r *Response) Decode(m *Msg) {
	r.Errno = m.i32(offWord1)
	r.RecvBufSize = m.i32(rspRecvBufSize)
	r.RecvSize = m.i32(rspRecvSize)
	r.RecvWidth = m.i32(rspRecvWidth)
	r.SendBufSize = m.i32(rspSendBufSize)
	r.SendSize = m.i32(rspSendSize)
	r.SendWidth = m.i32(rspSendWidth)
	r.Flags = m.u32(rspFlags)
	r.CPURate = m.f32(rspCPURate)
	r.TestLength = m.i32(rspTestLength)
	r.SoRcvAvoid = m.i32(rspSoRcvAvoid)
	r.SoSndAvoid = m.i32(rspSoSndAvoid)
	r.DataPort = m.i32(rspDataPort)
	r.IntervalBurst = m.i32(rspIntervalBurst)
	r.IntervalUsecs = m.i32(rspIntervalUsecs)
	r.CPUFrequency = m.i32(rspCPUFrequency)
	r.SecurityInfo = m.i32(rspSecurityInfo)
	r.SocketPrio = m.i32(rspSocketPrio)
	r.SocketTos = m.i32(rspSocketTos)
	r.SystemModel = m.str(rspSystemModel, 33)
	r.CPUModel = m.str(rspCPUModel, 80)
	r.Security = m.str(rspSecurity, 16)
}

// Results is omni_results_struct (sent by the server when its loop ends).
type Results struct {
	Errno          int32
	BytesReceived  uint64
	RecvCalls      uint32
	RecvBufSize    int32
	BytesSent      uint64
	SendCalls      uint32
	SendBufSize    int32
	FailedSends    uint32
	Trans          uint32
	Elapsed        float32
	CPUUtil        float32
	CPUUser        float32
	CPUSystem      float32
	CPUIOWait      float32
	CPUIRQ         float32
	CPUSoftIRQ     float32
	ServDem        float32
	CPUMethod      int32
	NumCPUs        int32
	PeakCPUID      int32
	PeakCPUUtil    float32
	Vendor         int32
	Device         int32
	Subvendor      int32
	Subdevice      int32
	TransportRetrx int32
	IfName         string // char[16]
	Driver         string // char[32]
	Version        string // char[32]
	Firmware       string // char[32]
	Bus            string // char[32]
	IfSlot         string // char[16]
	CongControl    string // char[16]
}

const (
	resBytesRxHi = 0x08 + 4*iota
	resBytesRxLo
	resRecvCalls
	resRecvBufSize
	resBytesTxHi
	resBytesTxLo
	resSendCalls
	resSendBufSize
	resFailedSends
	resTrans
	resElapsed
	resCPUUtil
	resCPUUser
	resCPUSystem
	resCPUIOWait
	resCPUIRQ
	resCPUSoftIRQ
	resServDem
	resCPUMethod
	resNumCPUs
	resPeakCPUID
	resPeakCPUUtil
	resVendor
	resDevice
	resSubvendor
	resSubdevice
	resRetrans
	resIfName      // 0x74
	resDriver      = resIfName + 16
	resVersion     = resDriver + 32
	resFirmware    = resVersion + 32
	resBus         = resFirmware + 32
	resIfSlot      = resBus + 32
	resCongControl = resIfSlot + 16
)

// CPUMethodProcStat is the cpu_method value for /proc/stat sampling ('S').
const CPUMethodProcStat = 8

// Encode writes r into m. The type word is OMNI_RESULTS; a C server would
// send junk there (Q1), and C clients never look.
func (r *Results) Encode(m *Msg) {
	clear(m[:])
	m.SetHeader(TypeOmniResults, r.Errno)
	m.putU(resBytesRxHi, uint32(r.BytesReceived>>32))
	m.putU(resBytesRxLo, uint32(r.BytesReceived))
	m.putU(resRecvCalls, r.RecvCalls)
	m.put(resRecvBufSize, r.RecvBufSize)
	m.putU(resBytesTxHi, uint32(r.BytesSent>>32))
	m.putU(resBytesTxLo, uint32(r.BytesSent))
	m.putU(resSendCalls, r.SendCalls)
	m.put(resSendBufSize, r.SendBufSize)
	m.putU(resFailedSends, r.FailedSends)
	m.putU(resTrans, r.Trans)
	m.putF(resElapsed, r.Elapsed)
	m.putF(resCPUUtil, r.CPUUtil)
	m.putF(resCPUUser, r.CPUUser)
	m.putF(resCPUSystem, r.CPUSystem)
	m.putF(resCPUIOWait, r.CPUIOWait)
	m.putF(resCPUIRQ, r.CPUIRQ)
	m.putF(resCPUSoftIRQ, r.CPUSoftIRQ)
	m.putF(resServDem, r.ServDem)
	m.put(resCPUMethod, r.CPUMethod)
	m.put(resNumCPUs, r.NumCPUs)
	m.put(resPeakCPUID, r.PeakCPUID)
	m.putF(resPeakCPUUtil, r.PeakCPUUtil)
	m.put(resVendor, r.Vendor)
	m.put(resDevice, r.Device)
	m.put(resSubvendor, r.Subvendor)
	m.put(resSubdevice, r.Subdevice)
	m.put(resRetrans, r.TransportRetrx)
	m.putStr(resIfName, 16, r.IfName)
	m.putStr(resDriver, 32, r.Driver)
	m.putStr(resVersion, 32, r.Version)
	m.putStr(resFirmware, 32, r.Firmware)
	m.putStr(resBus, 32, r.Bus)
	m.putStr(resIfSlot, 16, r.IfSlot)
	m.putStr(resCongControl, 16, r.CongControl)
}

// Decode fills r from m. The type word is ignored (Q1).
func (r *Results) Decode(m *Msg) {
	r.Errno = m.i32(offWord1)
	r.BytesReceived = uint64(m.u32(resBytesRxHi))<<32 | uint64(m.u32(resBytesRxLo))
	r.RecvCalls = m.u32(resRecvCalls)
	r.RecvBufSize = m.i32(resRecvBufSize)
	r.BytesSent = uint64(m.u32(resBytesTxHi))<<32 | uint64(m.u32(resBytesTxLo))
	r.SendCalls = m.u32(resSendCalls)
	r.SendBufSize = m.i32(resSendBufSize)
	r.FailedSends = m.u32(resFailedSends)
	r.Trans = m.u32(resTrans)
	r.Elapsed = m.f32(resElapsed)
	r.CPUUtil = m.f32(resCPUUtil)
	r.CPUUser = m.f32(resCPUUser)
	r.CPUSystem = m.f32(resCPUSystem)
	r.CPUIOWait = m.f32(resCPUIOWait)
	r.CPUIRQ = m.f32(resCPUIRQ)
	r.CPUSoftIRQ = m.f32(resCPUSoftIRQ)
	r.ServDem = m.f32(resServDem)
	r.CPUMethod = m.i32(resCPUMethod)
	r.NumCPUs = m.i32(resNumCPUs)
	r.PeakCPUID = m.i32(resPeakCPUID)
	r.PeakCPUUtil = m.f32(resPeakCPUUtil)
	r.Vendor = m.i32(resVendor)
	r.Device = m.i32(resDevice)
	r.Subvendor = m.i32(resSubvendor)
	r.Subdevice = m.i32(resSubdevice)
	r.TransportRetrx = m.i32(resRetrans)
	r.IfName = m.str(resIfName, 16)
	r.Driver = m.str(resDriver, 32)
	r.Version = m.str(resVersion, 32)
	r.Firmware = m.str(resFirmware, 32)
	r.Bus = m.str(resBus, 32)
	r.IfSlot = m.str(resIfSlot, 16)
	r.CongControl = m.str(resCongControl, 16)
}
