package netperf

// usage is netperf's global usage text (netsh.c), printed to stderr by -h
// and for a bad global option.
const usage = `
Usage: netperf [global options] -- [test options] 

Global options:
    -a send,recv      Set the local send,recv buffer alignment
    -A send,recv      Set the remote send,recv buffer alignment
    -B brandstr       Specify a string to be emitted with brief output
    -c [cpu_rate]     Report local CPU usage
    -C [cpu_rate]     Report remote CPU usage
    -d                Increase debugging output
    -D time,[units] * Display interim results at least every time interval
                      using units as the initial guess for units per second
                      A negative value for time will make heavy use of the
                      system's timestamping functionality
    -f G|M|K|g|m|k    Set the output units
    -F lfill[,rfill]* Pre-fill buffers with data from specified file
    -h                Display this text
    -H name|ip,fam *  Specify the target machine and/or local ip and family
    -i max,min        Specify the max and min number of iterations (15,1)
    -I lvl[,intvl]    Specify confidence level (95 or 99) (99) 
                      and confidence interval in percentage (10)
    -j                Keep additional timing statistics
    -l testlen        Specify test duration (>0 secs) (<0 bytes|trans)
    -L name|ip,fam *  Specify the local ip|name and address family
    -o send,recv      Set the local send,recv buffer offsets
    -O send,recv      Set the remote send,recv buffer offset
    -n numcpu         Set the number of processors for CPU util
    -N                Establish no control connection, do 'send' side only
    -p port,lport*    Specify netserver port number and/or local port
    -P 0|1            Don't/Do display test headers
    -r                Allow confidence to be hit on result only
    -s seconds        Wait seconds between test setup and test start
    -S                Set SO_KEEPALIVE on the data connection
    -t testname       Specify test to perform
    -T lcpu,rcpu      Request netperf/netserver be bound to local/remote cpu
    -v verbosity      Specify the verbosity level
    -W send,recv      Set the number of send,recv buffers
    -v level          Set the verbosity level (default 1, min 0)
    -V                Display the netperf version and exit
    -y local,remote   Set the socket priority
    -Y local,remote   Set the IP_TOS. Use hexadecimal.
    -Z passphrase     Set and pass to netserver a passphrase

For those options taking two parms, at least one must be specified;
specifying one value without a comma will set both parms to that
value, specifying a value with a leading comma will set just the second
parm, a value with a trailing comma will set just the first. To set
each parm to unique values, specify both and separate them with a
comma.

* For these options taking two parms, specifying one value with no comma
will only set the first parms and will leave the second at the default
value. To set the second value it must be preceded with a comma or be a
comma-separated pair. This is to retain previous netperf behaviour.
`

// testUsage is the usage of the test options after "--" (nettest_omni.c),
// printed to stdout by "-- -h".
const testUsage = `
Usage: netperf [global options] -- [test options] 

OMNI and Migrated BSD Sockets Test Options:
    -b number         Send number requests at start of _RR tests
    -c                Explicitly declare this a connection test such as
                      TCP_CRR or TCP_CC
    -C                Set TCP_CORK when available
    -d direction      Explicitly set test direction based on bitwise OR
                      of 0x2 for transmit and 0x4 for receive. Default:
                      based on test type
    -D [L][,R]        Set TCP_NODELAY locally and/or remotely (TCP_*)
    -f                Set IP_MTU_DISCOVER:IP_PMTU_DISC_DO where available
    -F                Use TCP Fast Open functionality where available
    -h                Display this text
    -H name[/mask],fam  Use name (or IP) and family as target of data connection
                      A mask value will cause randomization of the IP used
    -k [file]         Generate keyval output optionally based on file
                      Use filename of '?' to get the list of choices
    -K loc[,rem]      Set the local and/or remote congestion control
                      algorithm to use on those platforms where it can
                      be set.
    -L name[/mask],fam  Use name (or IP) and family as source of data connection
                      A mask value will cause randomization of the IP used
    -m local,remote   Set the send size for _STREAM/_MAERTS tests
    -M local,remote   Set the recv size for _STREAM/_MAERTS tests
    -n                Use the connected socket for UDP locally
    -N                Use the connected socket for UDP remotely
    -o [file]         Generate CSV output optionally based on file
                      Use filename of '?' to get the list of choices
    -O [file]         Generate classic-style output based on file
                      Use filename of '?' to get the list of choices
    -p min[,max]      Set the min/max port numbers for TCP_CRR, TCP_TRR
    -P local[,remote] Set the local/remote port for the data socket
    -r req,[rsp]      Set request/response sizes (TCP_RR, UDP_RR)
    -R 0/1            Allow routing of traffic on data connection.
                      Default: 0 (off) for UDP_STREAM, 1 (on) otherwise
    -s send[,recv]    Set local socket send/recv buffer sizes
    -S send[,recv]    Set remote socket send/recv buffer sizes
    -t type           Explicitly set socket type. Default is implicit
                      based on other settings
    -T protocol       Explicitly set data connection protocol. Default is
                      implicit based on other settings
    -u uuid           Use the supplied string as the UUID for this test.
    -4                Use AF_INET (eg IPv4) on both ends of the data conn
    -6                Use AF_INET6 (eg IPv6) on both ends of the data conn

For those options taking two parms, at least one must be specified;
specifying one value without a comma will set both parms to that
value, specifying a value with a leading comma will set just the second
parm, a value with a trailing comma will set just the first. To set
each parm to unique values, specify both and separate them with a
comma.
`
