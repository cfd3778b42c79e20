in on nic2 icmp 10.1.2.1 224.0.0.1 echo
out on nic2 icmp 10.9.9.9 10.1.2.1 timestrep
out on nic2 icmp 10.8.8.8 10.1.2.1 echorep
