// Command ktrial-franz is ktrial's franz-go driver worker: one logical process's
// Kafka client, driven over JSON lines (docs/drivers.md).
//
// It reads one request per line on stdin and writes exactly one reply per line on
// stdout, in order. The worker only talks to Kafka: recording, timing, retirement
// and the rewind rules stay on ktrial's side (workloads/ops.py). Logs go to stderr.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--classify-table" {
		classifyTable(os.Stdout)
		return
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	w := &worker{}
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			if err != io.EOF {
				fmt.Fprintf(os.Stderr, "ktrial-franz: reading stdin: %v\n", err)
			}
			w.shutdown(false)
			return
		}
		var req request
		var reply map[string]any
		if jerr := json.Unmarshal(line, &req); jerr != nil {
			reply = failure(errRecord{Name: "BadRequest", Message: fmt.Sprintf("not a JSON request: %v", jerr)})
		} else {
			reply = w.handle(&req)
		}
		reply["id"] = req.ID
		buf, merr := json.Marshal(reply)
		if merr != nil {
			buf, _ = json.Marshal(failure(errRecord{Name: "BadReply", Message: merr.Error()}))
		}
		out.Write(buf)
		out.WriteByte('\n')
		if ferr := out.Flush(); ferr != nil {
			w.shutdown(false)
			return
		}
		if req.Call == "close" {
			return
		}
	}
}
