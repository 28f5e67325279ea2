-- wrk script: POST the .npy file named by WEFT_BENCH_BODY to WEFT_BENCH_PATH; with
-- WEFT_BENCH_DELAY_MS > 0 each connection waits that long after each response (a paced load).
wrk.method = "POST"
wrk.path = os.getenv("WEFT_BENCH_PATH")
wrk.headers["Content-Type"] = "application/x-npy"
local f = assert(io.open(os.getenv("WEFT_BENCH_BODY"), "rb"))
wrk.body = f:read("*all")
f:close()
local pause = tonumber(os.getenv("WEFT_BENCH_DELAY_MS") or "0")
function delay()
  return pause
end
