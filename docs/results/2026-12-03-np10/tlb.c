#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>
#include <sys/syscall.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int c,char**v){
  int iters=200000; char *m=aligned_alloc(4096, 4096*256);
  for(int i=0;i<256*4096;i++)m[i]=i;
  int Ns[]={0,4,8,16,32,64};
  for(int k=0;k<6;k++){int N=Ns[k]; volatile int s=0; double t0=now();
    for(int i=0;i<iters;i++){ syscall(SYS_getppid); for(int j=0;j<N;j++) s+=m[j*4096*3 % (4096*256) + (i&63)*64]; }
    double t1=now();
    double t2=now(); for(int i=0;i<iters;i++){ for(int j=0;j<N;j++) s+=m[j*4096*3 % (4096*256) + (i&63)*64]; } double t3=now();
    printf("N=%2d pages: syscall+touch %.1f ns/iter, touch only %.1f ns/iter\n",N,(t1-t0)/iters*1e9,(t3-t2)/iters*1e9);}
}
