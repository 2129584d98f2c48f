#!/usr/bin/env python3
"""MCP beside REST on the same servers (bench/README.md, "Seventh pass").

    bench/profile/mcp_rest.py NAME=TOOLHOST [NAME=TOOLHOST ...]

Starts each build with plugins/echo.wasm, then alternates 3 s `wrk -t2
-c16` rounds of a REST call and a stateless 2026-07-28 MCP call (mcp.lua)
on every server; prints medians of req/s and server CPU per request (from
/proc), MCP ÷ REST and the CPU MCP adds. ROUNDS (default 10) and SECS
(default 3) in the environment. Needs wrk.
"""
import os, subprocess, sys, time, statistics, re, shutil, tempfile
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ROUNDS=int(os.environ.get("ROUNDS","10")); SECS=os.environ.get("SECS","3")
tick=os.sysconf("SC_CLK_TCK"); servers=[]
for i,arg in enumerate(sys.argv[1:]):
    name,binp=arg.split("=")
    d=tempfile.mkdtemp(prefix="rm2-"); os.makedirs(d+"/plugins"); shutil.copy(os.path.join(ROOT, "plugins/echo.wasm"), d+"/plugins/echo.wasm")
    port=19700+i
    p=subprocess.Popen([binp,"serve","--plugins",d+"/plugins","--cache-dir",d+"/cache","--listen",f"127.0.0.1:{port}"],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
    servers.append((name,p,port))
time.sleep(4)
kinds={"rest":(os.path.join(HERE, "rest.lua"),"/tools/echo"),"mcp":(os.path.join(HERE, "mcp.lua"),"/mcp")}
res={(s[0],k):{"rps":[],"cpu":[]} for s in servers for k in kinds}
def cpu(p):
    f=open(f"/proc/{p.pid}/stat").read().rsplit(")",1)[1].split(); return int(f[11])+int(f[12])
jobs=[(s,k) for s in servers for k in kinds]
for r in range(ROUNDS):
    for (name,p,port),k in (jobs if r%2==0 else jobs[::-1]):
        lua,path=kinds[k]; c0=cpu(p)
        o=subprocess.run(["wrk","-t2","-c16",f"-d{SECS}s","-s",lua,f"http://127.0.0.1:{port}{path}"],capture_output=True,text=True).stdout
        c1=cpu(p); n=int(re.search(r"(\d+) requests in",o).group(1))
        res[(name,k)]["rps"].append(float(re.search(r"Requests/sec:\s+([\d.]+)",o).group(1))); res[(name,k)]["cpu"].append((c1-c0)/tick*1e6/n)
m=statistics.median
for (name,p,port) in servers:
    a,b=res[(name,"rest")],res[(name,"mcp")]
    print(f"{name}: rest {m(a['rps']):.0f} req/s {m(a['cpu']):.1f} us; mcp {m(b['rps']):.0f} req/s {m(b['cpu']):.1f} us; mcp/rest median of ratios {m([x/y for x,y in zip(b['rps'],a['rps'])]):.3f}, cpu diff {m([x-y for x,y in zip(b['cpu'],a['cpu'])]):.1f} us")
    p.terminate()
