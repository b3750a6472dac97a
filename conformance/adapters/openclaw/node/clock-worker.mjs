// Worker-thread preload (see clock.mjs): Date reads the main thread's virtual now.
import wt from "node:worker_threads";

const buffer = wt.getEnvironmentData("sg-clock");
if (buffer) {
  const shared = new Float64Array(buffer);
  const RealDate = Date;
  class VirtualDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(shared[0]);
      else super(...args);
    }
    static now() { return shared[0]; }
  }
  globalThis.Date = VirtualDate;
}
