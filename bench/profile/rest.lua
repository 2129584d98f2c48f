wrk.method = "POST"
wrk.body = [[{"text":"hello"}]]
wrk.headers["Content-Type"] = "application/json"
